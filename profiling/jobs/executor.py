"""How a Compare or a Sweep runs its points: here, one after another (SerialExecutor), or on a
Ray cluster with one point per GPU (profiling/jobs/ray.py, imported only when asked for).

A job hands its points over as chains: a chain's points run in order, and a point whose
outcome ends its chain (a Sweep's unavailable or out-of-memory length) leaves the rest of the
chain unrun (None in the answer). A Compare's points are chains of one. Every executor answers
the same shape, so the Sweep and Compare results are the same objects wherever they ran.

No torch and no ray at import: the CLI and the app load this before they know what they run.

The app's cluster (ATTNPROF_RAY_ADDRESS) is the operator's setting, not a visitor's: it is
checked once, when the app starts (`check_app_ray`: does its host:port answer, within
RAY_CHECK_SECONDS), and said once in the log. Unreachable, the app's Compares and Sweeps run
here, one after another: a click never waits on ray.init's retries (2 minutes for an address
that does not answer), and no message on the page names the address.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from profiling.jobs.files import Progress, cancelled, run_progress
from profiling.user_values import ConfigError

if TYPE_CHECKING:
    from profiling.workload.spec import Workload

RAY_ADDRESS_ENV = "ATTNPROF_RAY_ADDRESS"  # the app runs its Sweeps and Compares there when set
LOCAL = "local"  # --ray without an address: Ray starts on this machine
RAY_CHECK_SECONDS = 3.0  # the app's start-up check of its cluster's address
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    """Where a point ran: the host, the device's name and (on a GPU) its UUID."""

    host: str
    device: str  # the GPU's name, or "CPU"
    uuid: str = ""  # the GPU's UUID: two GPUs of one model on one host differ here
    attempts: int = 1  # 2: its first worker died and it ran again on a fresh one

    def text(self) -> str:
        return f"{self.host} · {self.device}"


def placement_here(workload: Workload) -> Placement:
    """Where `workload` runs in this process: a Ray worker sees only its own GPU, as cuda:0."""
    from profiling.workload.spec import resolve_device  # torch: a run is happening here anyway

    host = socket.gethostname()
    if resolve_device(workload.device) != "cuda":
        return Placement(host, "CPU")
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return Placement(host, props.name, str(getattr(props, "uuid", "")))


RAN_ON = "ran on"  # the tables' column on a mixed cluster


def ran_on_texts(placements: Sequence[Placement | None]) -> list[str] | None:
    """Each row's host and device when the rows ran on more than one GPU model (a mixed
    cluster), so a table splits by device; None on one model, where every row would say the
    same (the zip's JSON and each point's record keep the placement either way)."""
    if len({p.device for p in placements if p is not None}) < 2:
        return None
    return [p.text() if p is not None else "" for p in placements]


def ran_on_csv(rows: Iterable[tuple[str, Placement | None]]) -> str:
    """(name, placement) pairs as CSV: where each ran, and after how many attempts."""
    text = io.StringIO()
    table = csv.writer(text)
    table.writerow(["variant", "host", "device", "uuid", "attempts"])
    table.writerows([name, p.host, p.device, p.uuid, p.attempts] for name, p in rows if p)
    return text.getvalue()


# (workload, folder for its files, progress) -> the job's record of the point (picklable)
PointRun = Callable[["Workload", Path, Progress], Any]


@dataclass(frozen=True)
class PointJob:
    """One point of a job: what runs it, where its files go, and its record when it cannot."""

    index: int  # its place in the job's order, for progress
    label: str  # "naive S=1024"
    workload: Workload
    run: PointRun  # module-level or a functools.partial of one, so it can travel to a worker
    out_dir: Path  # the folder its files end up in (the job's, on the machine that asked)
    failed: Callable[[str], Any]  # its record when no worker could run it, given the reason


@dataclass(frozen=True)
class Outcome:
    """A point's record (what `PointJob.run` returned) and where it ran."""

    value: Any
    placement: Placement | None  # None: no worker ran it (cancelled)


Chains = Sequence[Sequence[PointJob]]
Answer = list[list[Outcome | None]]  # per chain, per point; None: not run, its chain had ended


@dataclass(frozen=True)
class Hooks:
    """What a job hands its executor beside the chains, the same for every executor."""

    report: Progress  # the whole job's progress
    before: Callable[[], None]  # called before each point starts; raises to end the job
    ends_chain: Callable[[Any], bool]  # true for a record after which its chain goes no further


class Executor(Protocol):
    def run(self, chains: Chains, hooks: Hooks) -> Answer:
        """Run every chain, calling `hooks` around its points."""
        ...


class SerialExecutor:
    """Today's loop: every point in this process, one after another, in the job's order."""

    def run(self, chains: Chains, hooks: Hooks) -> Answer:
        total = sum(len(chain) for chain in chains)
        answer: Answer = []
        for chain in chains:
            outcomes: list[Outcome | None] = []
            ended = False
            for job in chain:
                if ended:
                    outcomes.append(None)
                    continue
                hooks.before()
                step = run_progress(hooks.report, job.index, total, job.label)
                value = job.run(job.workload, job.out_dir, step)
                outcomes.append(Outcome(value, placement_here(job.workload)))
                ended = hooks.ends_chain(value)
            answer.append(outcomes)
        return answer


@dataclass(frozen=True)
class JobOptions:
    """How a Compare or a Sweep runs, apart from what it profiles: its folder (None: a fresh
    temporary one, removed if the job is cancelled), its progress, whether it zips, when its
    client has cancelled it, and where its points run (None: here, one after another)."""

    out_dir: str | Path | None = None
    progress: Progress | None = None
    make_zip: bool = True
    stop: Callable[[], bool] | None = None
    executor: Executor | None = None


def run_chains(
    chains: Chains, out: Path, options: JobOptions, ends_chain: Callable[[Any], bool], done: str
) -> Answer:
    """A job's chains run on its executor, checked for a cancel before each point and once
    after the last (its folder `out` is then removed if the job made it: no zip, no page)."""
    report = options.progress or (lambda fraction, text: None)
    before = partial(cancelled, options.stop, out, made=options.out_dir is None)
    answer = (options.executor or SerialExecutor()).run(chains, Hooks(report, before, ends_chain))
    before()  # cancelled during the last run
    report(1.0, done)
    return answer


def executor_for(ray: str | None, public: bool = False) -> Executor:
    """The executor a job runs on: None → this process; LOCAL → a Ray cluster started here with
    every GPU of the machine; an address → the Ray cluster there. Ray is imported only here.
    `public`: the app's (its failures name no address; the log has it)."""
    if ray is None:
        return SerialExecutor()
    try:
        from profiling.jobs.ray import RayExecutor
    except ImportError as exc:
        raise ConfigError(
            f"running on Ray needs Ray installed ({exc}): pip install -r requirements-ray.txt"
        ) from None

    return RayExecutor(None if ray == LOCAL else ray, public=public)


def unreachable(address: str, seconds: float = RAY_CHECK_SECONDS) -> str:
    """Why a cluster's address does not answer ('' when its host:port takes a TCP connection,
    or the address is not one: "auto", "local", which ray.init resolves)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return ""
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=seconds):
            return ""
    except OSError as exc:
        return f"{host}:{port} does not answer ({exc.strerror or exc})"


_APP_EXECUTOR: list[Executor] = []  # the app's, made on its first job
_APP_RAY: dict[str, str] = {}  # the app's address → '' (answers) or why not: checked once


def _app_address() -> str:
    return os.environ.get(RAY_ADDRESS_ENV, "").strip()


def check_app_ray() -> str:
    """Once, at the app's start: whether ATTNPROF_RAY_ADDRESS answers ('' when it does or is
    not set, else why not, said once in the log)."""
    address = _app_address()
    if not address:
        return ""
    if address not in _APP_RAY:
        _APP_RAY[address] = reason = unreachable(address)
        if reason:
            log.error("%s=%s cannot be reached: %s; the app's Compares and Sweeps run on this "
                      "machine, one after another", RAY_ADDRESS_ENV, address, reason)  # fmt: skip
    return _APP_RAY[address]


def app_executor() -> Executor | None:
    """Where the app's Sweeps and Compares run: None (this process, one after another) unless
    the app was started with ATTNPROF_RAY_ADDRESS (an address, or "local" for a cluster on
    this machine) and it answered (check_app_ray), and the app has not failed to join it.
    One executor for the app's life, so its workers stay warm between jobs."""
    address = _app_address()
    if not address or check_app_ray():
        return None
    if not _APP_EXECUTOR:
        _APP_EXECUTOR.append(executor_for(address, public=True))
    if getattr(_APP_EXECUTOR[0], "failed", False):  # its one try to join said so, once
        return None
    return _APP_EXECUTOR[0]
