"""Sweeps and Compares on a Ray cluster: one long-lived worker (a Ray actor) per GPU, one point
per worker at a time, so no two profiled runs share a GPU and torch's import, Triton builds and
torch.compile happen once per GPU, not once per point.

Imported only when a job asks for Ray (--ray, ATTNPROF_RAY_ADDRESS): nothing else imports ray.

A worker runs a point through the same function as the serial loop, in a folder of its own,
and sends back the record, where it ran and the bytes of every file the point wrote; the
driver writes them into the job's folder and points the record's paths there. Faults:

- a worker that dies (killed, out of host memory, or whose CUDA context a failed point left
  broken) is replaced, and its point runs once more on the fresh worker; dying again, the point
  is recorded as failed with the reason. A point is recorded once, by the attempt that counts.
- an unavailable, refused or out-of-memory point is an outcome, not a fault: never retried.
- Ctrl-C stops the points in flight and those not started; they are recorded as failed
  ("cancelled"), and the finished ones, already written, are kept.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from profiling.jobs.executor import (
    Answer,
    Chains,
    Hooks,
    Outcome,
    Placement,
    PointJob,
    placement_here,
)
from profiling.jobs.files import Progress
from profiling.user_values import ConfigError

DIE_ON_ENV = "ATTNPROF_TEST_DIE_ON"  # tests: a worker exits mid-point (see _die_hook)
ATTEMPTS = 2  # a point's first run and one more on a fresh worker
POLL_SECONDS = 0.5  # how often the driver looks at a cancel request while points run
CANCELLED = "not run: cancelled (Ctrl-C)"
PACKAGES = ("profiling", "attention")  # shipped to a remote cluster's workers
CHECKOUT = Path(__file__).resolve().parents[2]  # the repository root: profiling/jobs/ray.py
APP_CLUSTER_FAILED = (
    "the Ray cluster this app is set to use could not be joined (the server's log says why); "
    "run again: the next Compares and Sweeps run on this machine"
)
log = logging.getLogger(__name__)


@dataclass
class Shipped:
    """What a worker sends back for one point."""

    value: Any  # the job's record, its paths still in the worker's folder
    placement: Placement
    files: dict[str, bytes]  # path under `folder` → bytes
    folder: Path
    broken: bool  # the worker's CUDA context no longer works: replace the worker


class PointWorker:
    """A Ray actor: one GPU (or one CPU), one point at a time, torch loaded once."""

    def __init__(self) -> None:
        from profiling.run.runner import prime_profiler, quiet_profiler_logs

        quiet_profiler_logs()
        prime_profiler()  # kineto's client is registered on this, the actor's own thread
        self.root = Path(tempfile.mkdtemp(prefix="attnprof-ray-"))

    def run(self, job: PointJob, die_on: str = "") -> Shipped:
        folder = Path(tempfile.mkdtemp(dir=self.root))
        value = job.run(job.workload, folder / job.out_dir.name, _die_hook(job, die_on))
        files = {
            str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        }
        shutil.rmtree(folder, ignore_errors=True)
        return Shipped(value, placement_here(job.workload), files, folder, _cuda_broken(job))


def _die_hook(job: PointJob, die_on: str) -> Progress:
    """The test hook: DIE_ON_ENV="VARIANT:SEQ_LEN[:TIMES]", read where the job was started and
    handed to the worker with each point (with "@" and a folder of that job's), makes the
    worker running that point exit as the point reports progress (mid-run), the first TIMES
    times (default 1) in the job: files in the folder count the deaths across workers, so the
    hook needs workers on the driver's machine (a local cluster, as the tests use)."""
    spec, _, folder = die_on.partition("@")
    variant, _, rest = spec.partition(":")
    seq_len, _, times = rest.partition(":")
    if (variant, seq_len) != (job.workload.variant, str(job.workload.seq_len)):
        return lambda fraction, text: None
    marks = [Path(folder) / f"died-{n}" for n in range(int(times or 1))]

    def progress(fraction: float, text: str) -> None:
        for mark in marks if fraction > 0 else []:
            try:
                os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            os._exit(17)  # as a killed worker would: no cleanup, no answer

    return progress


def _cuda_broken(job: PointJob) -> bool:
    """Whether a CUDA error left this process's context unusable (every later run would fail)."""
    from profiling.workload.spec import resolve_device

    if resolve_device(job.workload.device) != "cuda":
        return False
    import torch

    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
    except Exception:
        return True
    return False


def relocated(value: Any, old: Path, new: Path) -> Any:
    """`value` with every path under `old` moved under `new` (dataclasses, lists and tuples
    rebuilt only where something moved)."""
    if isinstance(value, Path):
        return new / value.relative_to(old) if value.is_relative_to(old) else value
    if isinstance(value, (list, tuple)):
        items = [relocated(item, old, new) for item in value]
        same = all(a is b for a, b in zip(items, value, strict=True))
        return value if same else type(value)(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for field in dataclasses.fields(value):
            if field.init:
                current = getattr(value, field.name)
                moved = relocated(current, old, new)
                if moved is not current:
                    changes[field.name] = moved
        return dataclasses.replace(value, **changes) if changes else value
    return value


def received(job: PointJob, shipped: Shipped, attempts: int) -> Outcome:
    """A finished point's files written into the job's folder, its record pointing at them."""
    home = job.out_dir.parent
    for name, data in shipped.files.items():
        path = home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    placement = dataclasses.replace(shipped.placement, attempts=attempts)
    return Outcome(relocated(shipped.value, shipped.folder, home), placement)


class RayExecutor:
    """Points on a Ray cluster: `address` joins one, None starts one here with every GPU of
    the machine. The workers live as long as this object (the app keeps one), one per GPU,
    or one per CPU where the cluster has no GPU or the points ask for the CPU; `workers`
    caps their number."""

    def __init__(
        self, address: str | None, workers: int | None = None, public: bool = False
    ) -> None:
        self.address = address
        self.workers = workers
        self.public = public  # the app's: a visitor is never shown the cluster's address
        self.failed = False  # the app's could not join its cluster: its jobs run here after
        self._pool: list[Any] = []
        self._pool_options: dict[str, Any] = {}

    def run(self, chains: Chains, hooks: Hooks) -> Answer:
        """Each chain's points in order; chains side by side, one point per worker."""
        self._connect()
        jobs = [job for chain in chains for job in chain]
        size = self._ensure_pool(jobs)
        return _Schedule(self, chains, size, hooks).run()

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        try:
            self._init()
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"at {self.address}" if self.address else "on this machine"
            hint = _token_hint(self.address)
            said = f"cannot start or reach the Ray cluster {where}: {exc}{hint}"
            if not self.public:
                raise ConfigError(said) from None
            self.failed = True
            log.error("%s; the app's next Compares and Sweeps run on this machine", said)
            raise ConfigError(APP_CLUSTER_FAILED) from None

    def _init(self) -> None:
        if self.address is None:  # a local cluster: every GPU and CPU of this machine
            ray.init(logging_level=logging.WARNING, log_to_driver=False, include_dashboard=False)
            return
        modules = [str(CHECKOUT / name) for name in PACKAGES]  # this checkout's code, not theirs
        ray.init(
            address=self.address,
            logging_level=logging.WARNING,
            log_to_driver=False,
            runtime_env={"py_modules": modules},
        )

    def _ensure_pool(self, jobs: list[PointJob]) -> int:
        """Workers for these points (kept from an earlier job when they fit); how many."""
        resources = ray.cluster_resources()
        on_gpu = resources.get("GPU", 0) >= 1 and all(j.workload.device != "cpu" for j in jobs)
        kind, count = ("GPU", resources["GPU"]) if on_gpu else ("CPU", resources.get("CPU", 1))
        size = max(1, min(int(count), len(jobs), self.workers or len(jobs)))
        options: dict[str, Any] = {"num_gpus": 1} if on_gpu else {"num_cpus": 1}
        if self.address is None:  # workers on this machine import this checkout, from any cwd
            path = os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))
            options["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
        if options != self._pool_options:
            self.close()
            self._pool_options = options
        while len(self._pool) < size:
            self._pool.append(self.spawn())
        self.kind = kind
        return size

    def spawn(self) -> Any:
        return ray.remote(PointWorker).options(**self._pool_options).remote()

    def replace(self, index: int) -> Any:
        """Kill worker `index` (dead already, or its context broken) and start a fresh one."""
        ray.kill(self._pool[index], no_restart=True)
        self._pool[index] = self.spawn()
        return self._pool[index]

    def worker(self, index: int) -> Any:
        return self._pool[index]

    def close(self) -> None:
        for actor in self._pool:
            ray.kill(actor, no_restart=True)
        self._pool = []


class _Schedule:
    """One job's run over the pool: which chain each worker runs, what came back."""

    def __init__(self, executor: RayExecutor, chains: Chains, size: int, hooks: Hooks) -> None:
        self.executor, self.chains, self.size = executor, chains, size
        self.report, self.before, self.ends_chain = hooks.report, hooks.before, hooks.ends_chain
        self.answer: Answer = [[] for _ in chains]
        self.attempts = [1] * len(chains)
        self.busy: dict[Any, tuple[int, int]] = {}  # ref → (worker, chain)
        self.total = sum(len(chain) for chain in chains)
        self.die_on = os.environ.get(DIE_ON_ENV, "")
        if self.die_on:  # the test hook's deaths are counted per job, in a folder of its own
            self.die_on += "@" + tempfile.mkdtemp(prefix="attnprof-die-")

    def run(self) -> Answer:
        try:
            while self._next_chain() is not None or self.busy:
                self._start_points()
                done, _ = ray.wait(list(self.busy), num_returns=1, timeout=POLL_SECONDS)
                for ref in done:
                    self._finished(ref)
                self._say()
        except KeyboardInterrupt:
            self._cancel()
        return self.answer

    def _next_chain(self) -> int | None:
        """The first chain with a point left to run and none running."""
        running = {chain for _, chain in self.busy.values()}
        for index, chain in enumerate(self.chains):
            if index not in running and len(self.answer[index]) < len(chain):
                return index
        return None

    def _start_points(self) -> None:
        idle = [w for w in range(self.size) if w not in {w for w, _ in self.busy.values()}]
        for worker in idle:
            chain = self._next_chain()
            if chain is None:
                return
            self.before()  # a cancelled job ends here; points in flight finish on their own
            job = self.chains[chain][len(self.answer[chain])]
            ref = self.executor.worker(worker).run.remote(job, self.die_on)
            self.busy[ref] = (worker, chain)

    def _finished(self, ref: Any) -> None:
        worker, chain = self.busy.pop(ref)
        job = self.chains[chain][len(self.answer[chain])]
        try:
            shipped: Shipped = ray.get(ref)
        except RayActorError as exc:
            self.executor.replace(worker)
            self._retry_or_fail(chain, job, f"its worker died: {_first_line(exc)}")
            return
        except Exception as exc:  # the point's own code raised on the worker: not a death
            self._record(chain, Outcome(job.failed(_first_line(exc)), None))
            return
        if shipped.broken:
            self.executor.replace(worker)
            if self.attempts[chain] < ATTEMPTS:  # its record came from a broken context
                self.attempts[chain] += 1
                return
        self._record(chain, received(job, shipped, self.attempts[chain]))

    def _retry_or_fail(self, chain: int, job: PointJob, reason: str) -> None:
        if self.attempts[chain] < ATTEMPTS:
            self.attempts[chain] += 1  # the chain's point runs again on the next free worker
            return
        self._record(chain, Outcome(job.failed(f"{reason} (tried on {ATTEMPTS} workers)"), None))

    def _record(self, chain: int, outcome: Outcome) -> None:
        """One point's outcome, once; the rest of its chain is not run if it ends the chain."""
        outcomes, length = self.answer[chain], len(self.chains[chain])
        outcomes.append(outcome)
        self.attempts[chain] = 1
        if outcome.placement is not None and self.ends_chain(outcome.value):
            outcomes.extend([None] * (length - len(outcomes)))

    def _cancel(self) -> None:
        """Ctrl-C: the points in flight stop with their workers; nothing else starts."""
        self.executor.close()  # the next job starts fresh workers
        self.busy.clear()
        for chain, outcomes in zip(self.chains, self.answer, strict=True):
            outcomes.extend(Outcome(job.failed(CANCELLED), None) for job in chain[len(outcomes) :])

    def _say(self) -> None:
        done = sum(len(outcomes) for outcomes in self.answer)
        kind = self.executor.kind
        now = [
            f"{kind}{worker}: {self.chains[chain][len(self.answer[chain])].label}"
            for worker, chain in sorted(self.busy.values())
        ]
        self.report(done / self.total, " · ".join([f"{done}/{self.total} points", *now]))


def _token_hint(address: str | None) -> str:
    """Why joining by address may fail where `auto` works: Ray (2.59 on) starts `ray start`'s
    cluster with token authentication where the machine has a token, and sends the token to
    an address given outright (argument or RAY_ADDRESS) only when RAY_AUTH_MODE=token."""
    if address is None or os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        " (a cluster that asks for a token is joined by address with RAY_AUTH_MODE=token and"
        " its token in ~/.ray/auth_token or RAY_AUTH_TOKEN: README, More than one GPU)"
    )


def _first_line(exc: BaseException) -> str:
    """The error's class and first line; for a point's own error, the point's (Ray wraps it in
    a RayTaskError whose first line is Ray's banner: the actor's pid, ip and id, in colour)."""
    cause = getattr(exc, "cause", None)
    if isinstance(exc, RayTaskError) and isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()
