"""Issue 41: profiling/jobs/ray.py's every rule, fast enough to run once per mutant. A real
local Ray cluster (ray.init) for the module, two long-lived CPU workers and trivial points
(tests/jobs/ray_points.py): the order of chains and points, a chain that ends, a point that
raises, a worker that dies once or twice, Ctrl-C, the files and paths a point sends back, the
pool kept or replaced. What runs inside a worker (PointWorker.run, the die hook, the CUDA
check) is also called here in this process, where a coverage-guided mutation tool sees it.
The GPU tests declare three GPUs to Ray, which hands each worker its GPU ids whether or not CUDA
is there; a broken CUDA context is the point's doing, faked in the worker it ran on (Ray, the
executor and the retry are the real ones). tests/jobs/test_ray.py runs real profiled points
the same way, slower."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

import pytest
import ray
import ray.exceptions
import torch
from ray.exceptions import RayActorError, RayTaskError

import profiling.workload.spec as spec
from profiling.jobs import ray as on_ray
from profiling.jobs.executor import Outcome, Placement, placement_here
from profiling.jobs.ray import (
    ATTEMPTS,
    CANCELLED,
    CHECKOUT,
    DIE_ON_ENV,
    PointWorker,
    RayExecutor,
    Shipped,
    received,
    relocated,
)
from tests.jobs import ray_points
from tests.jobs.ray_points import Said, Written
from tests.jobs.ray_points import point_job as _job


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=4, num_gpus=3, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def two_cpus(cluster):
    """Two CPU workers kept for the module: each imports torch once."""
    executor = RayExecutor(None, workers=2)
    yield executor
    executor.close()


@pytest.fixture(scope="module")
def two_gpus(cluster):
    """A worker per GPU the cluster declares: Ray hands each its GPU ids (CUDA_VISIBLE_DEVICES)
    whether or not CUDA is there, which is what placement is about."""
    executor = RayExecutor(None)
    yield executor
    executor.close()


# -- in this process: what a worker does --------------------------------------------------------


def test_a_worker_ships_each_file_by_its_path_in_the_points_folder(tmp_path):
    worker = PointWorker()
    try:
        job = _job(0, tmp_path / "job")
        shipped = worker.run(job)
        assert shipped.files == {"p0/trace.txt": b"naive 32", "p0/sub/extra.bin": b"\0\1\2\xff"}
        assert shipped.folder.parent == worker.root and not shipped.folder.exists()  # removed
        assert worker.root.name.startswith("attnprof-ray-")  # whose folder it is, in /tmp
        assert shipped.value.trace == shipped.folder / "p0" / "trace.txt"  # still the worker's
        assert shipped.placement == placement_here(job.workload) and shipped.broken is False
        assert not (tmp_path / "job").exists()  # nothing written where the job asked
    finally:
        os.rmdir(worker.root)


def _exit_status(hook, fractions: tuple[float, ...] = (0.0, 0.5)) -> int:
    """The hook called at each fraction in a forked child: the child's exit status."""
    pid = os.fork()
    if pid == 0:
        for fraction in fractions:
            hook(fraction, "progress")
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("times", ["", ":1", ":2"])
def test_the_die_hook_ends_its_points_worker_the_times_asked(tmp_path, times):
    folder = tmp_path / "job@1"  # the job's folder may hold an "@": the first one splits
    folder.mkdir()
    hook = on_ray._die_hook(_job(0, tmp_path), f"naive:32{times}@{folder}")
    assert _exit_status(hook, (0.0,)) == 0  # the point's start: not yet
    deaths = 2 if times == ":2" else 1
    assert [_exit_status(hook) for _ in range(deaths + 1)] == [17] * deaths + [0]
    assert sorted(p.name for p in folder.iterdir()) == [f"died-{n}" for n in range(deaths)]


def test_a_job_passes_the_test_hooks_deaths_only_when_asked(monkeypatch):
    """Unset, no death spec and no folder; set, the spec with a fresh folder of its own for
    the job's count of deaths, named as ours (a leftover in /tmp says whose it is)."""
    monkeypatch.delenv(DIE_ON_ENV, raising=False)
    assert on_ray._Schedule(None, [[]], 1, Said().hooks()).die_on == ""
    monkeypatch.setenv(DIE_ON_ENV, "naive:64:2")
    spec, _, folder = on_ray._Schedule(None, [[]], 1, Said().hooks()).die_on.partition("@")
    try:
        assert spec == "naive:64:2"
        assert Path(folder).parent == Path(tempfile.gettempdir())
        assert Path(folder).name.startswith("attnprof-die-") and not any(Path(folder).iterdir())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("die_on", ["", "naive:64", "sdpa-math:32", "naive:3", "naive:32x"])
def test_the_die_hook_leaves_other_points_alone(tmp_path, die_on):
    hook = on_ray._die_hook(_job(0, tmp_path), f"{die_on}@{tmp_path}")
    assert _exit_status(hook) == 0 and list(tmp_path.iterdir()) == []


def test_the_cuda_check_runs_only_for_a_cuda_point(tmp_path, monkeypatch):
    job = _job(0, tmp_path)
    assert on_ray._cuda_broken(job) is False
    monkeypatch.setattr(spec, "resolve_device", lambda device: device)  # taken as asked
    cuda = dataclasses.replace(job, workload=dataclasses.replace(job.workload, device="cuda"))
    # no CUDA here: the check's own CUDA work fails, so the context reads as broken (on a GPU
    # machine a healthy context reads as not broken: tests/gpu)
    assert on_ray._cuda_broken(cuda) is (not torch.cuda.is_available())
    assert on_ray._cuda_broken(job) is False


def test_relocated_moves_only_paths_under_the_old_folder(tmp_path):
    old, new = Path("/w/tmp1"), Path("/job")
    record = Written("x", 1, old / "p0/trace.txt", (old / "p0/a", Path("/else/b")), Path("/k"))
    moved = relocated(record, old, new)
    assert moved == Written("x", 1, new / "p0/trace.txt", (new / "p0/a", Path("/else/b")),
                            Path("/k"))  # fmt: skip
    assert type(moved.extras) is tuple and moved.kept is record.kept
    assert relocated([old / "a", 3], old, new) == [new / "a", 3]
    untouched = [Path("/else"), "text", (1, 2)]
    assert relocated(untouched, old, new) is untouched  # nothing moved: the same object
    assert relocated(record, Path("/other"), new) is record
    assert relocated(Written, old, new) is Written  # a dataclass type, not a record
    assert relocated({"p": old / "a"}, old, new) == {"p": old / "a"}  # dicts are not walked


def test_a_received_point_is_written_into_the_jobs_folder(tmp_path):
    job = _job(0, tmp_path / "job")
    folder = Path("/worker/tmp9")
    value = Written("x", 1, folder / "p0/trace.txt", (folder / "p0/sub/e",), Path("/k"))
    files = {"p0/trace.txt": b"t", "p0/sub/e": b"e"}
    placed = Placement("host", "CPU")
    outcome = received(job, Shipped(value, placed, files, folder, False), attempts=2)
    home = tmp_path / "job"
    assert (home / "p0/trace.txt").read_bytes() == b"t" and (home / "p0/sub/e").read_bytes() == b"e"
    moved = Written("x", 1, home / "p0/trace.txt", (home / "p0/sub/e",), Path("/k"))
    assert outcome == Outcome(moved, Placement("host", "CPU", attempts=2))


def test_an_executor_is_not_the_apps_unless_said():
    """Only the app's executor hides the cluster's address: the CLI's errors name it."""
    assert RayExecutor("10.0.0.1:6379").public is False and RayExecutor(None).failed is False


def test_the_words_of_a_failure():
    assert on_ray._first_line(ValueError("first\nsecond")) == "ValueError: first"
    assert on_ray._first_line(ValueError("  \n")) == "ValueError:"
    assert on_ray._first_line(KeyError()) == "KeyError:"
    wrapped = RayTaskError("run", "Traceback ...", ValueError("the point's\nsecond"), pid=7)
    assert on_ray._first_line(wrapped) == "ValueError: the point's"  # not Ray's banner
    unknown = RayTaskError("run", "Traceback ...", None, pid=7)
    assert on_ray._first_line(unknown).startswith("RayTaskError: ")


def test_the_token_hint_only_for_an_address_without_an_auth_mode(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert on_ray._token_hint(None) == ""
    hint = on_ray._token_hint("10.0.0.1:6379")
    assert hint.startswith(" (a cluster that asks for a token is joined by address with ")
    assert "RAY_AUTH_MODE=token" in hint and hint.endswith("README, More than one GPU)")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert on_ray._token_hint("10.0.0.1:6379") == ""


# -- on the cluster: the schedule ----------------------------------------------------------------


def _values(answer) -> list[list]:
    return [[o.value if o is not None else None for o in chain] for chain in answer]


def test_chains_run_in_order_side_by_side_and_come_back_as_files(two_cpus, tmp_path):
    said = Said()
    (tmp_path / "meet").mkdir()
    meet = partial(ray_points.meets, str(tmp_path / "meet"))  # the first two run side by side
    chains = [[_job(0, tmp_path, meet), _job(1, tmp_path, seq_len=64)],
              [_job(2, tmp_path, meet), _job(3, tmp_path, seq_len=64)]]  # fmt: skip
    answer = two_cpus.run(chains, said.hooks())
    assert two_cpus.kind == "CPU" and said.starts == 4
    labels = [[o.value.label for o in chain] for chain in answer]
    assert labels == [["naive 32", "naive 64"], ["naive 32", "naive 64"]]
    assert {o.value.pid for chain in answer for o in chain} == set(_pids(two_cpus))  # both
    for index, outcome in enumerate(o for chain in answer for o in chain):
        assert outcome.value.trace == tmp_path / f"p{index}" / "trace.txt"
        assert outcome.value.extras == (tmp_path / f"p{index}" / "sub" / "extra.bin",)
        assert outcome.value.kept == Path("/nowhere/kept")
        assert outcome.value.trace.read_text() == outcome.value.label
        assert outcome.placement == Placement(placement_here(chains[0][0].workload).host, "CPU")
    fractions = [fraction for fraction, _ in said.reports]
    assert fractions == sorted(fractions) and said.reports[-1] == (1.0, "4/4 points")
    assert any(" · CPU0: point " in text and " · CPU1: point " in text for _, text in said.reports)


def _pids(executor: RayExecutor) -> list[int]:
    """Each pooled worker's process id, asked of the actor itself."""
    return ray.get([actor.__ray_call__.remote(_pid) for actor in executor._pool])


def _warm_pids(executor: RayExecutor, tmp_path: Path) -> list[int]:
    """Both workers' ids, the pool filled first: whichever test runs first (mutmut runs the
    fastest first) compares two workers, not an empty pool."""
    executor.run([[_job(0, tmp_path / "warm")], [_job(1, tmp_path / "warm")]], Said().hooks())
    pids = _pids(executor)
    assert len(pids) == 2
    return pids


def _pid(actor) -> int:
    return os.getpid()


def test_a_point_that_ends_its_chain_leaves_the_rest_unrun(two_cpus, tmp_path):
    chains = [[_job(0, tmp_path, ray_points.unavailable), _job(1, tmp_path), _job(2, tmp_path)],
              [_job(3, tmp_path), _job(4, tmp_path)]]  # fmt: skip
    said = Said()
    answer = two_cpus.run(chains, said.hooks())
    assert answer[0][1:] == [None, None] and answer[0][0].value["unavailable"] is True
    assert answer[0][0].placement.attempts == 1
    assert [o.value.label for o in answer[1]] == ["naive 32", "naive 32"]
    assert said.starts == 3 and said.reports[-1] == (1.0, "5/5 points")


def test_a_point_that_raises_is_failed_once_and_its_chain_goes_on(two_cpus, tmp_path):
    pids = _warm_pids(two_cpus, tmp_path)
    chains = [[_job(0, tmp_path, ray_points.raises), _job(1, tmp_path)]]
    answer = two_cpus.run(chains, Said().hooks())
    (failed, after) = answer[0]
    assert failed == Outcome({"failed": "ValueError: this point's own error"}, None)
    assert after.value.label == "naive 32" and after.placement.attempts == 1
    assert _pids(two_cpus) == pids  # a point's own error is no reason to replace its worker


def test_a_worker_that_dies_is_replaced_and_its_point_run_again(two_cpus, tmp_path, monkeypatch):
    monkeypatch.setenv(DIE_ON_ENV, "naive:64")
    before = _warm_pids(two_cpus, tmp_path)
    chains = [[_job(0, tmp_path, seq_len=64), _job(1, tmp_path)], [_job(2, tmp_path)]]
    answer = two_cpus.run(chains, Said().hooks())
    assert [[o.placement.attempts for o in chain] for chain in answer] == [[2, 1], [1]]
    assert [o.value.label for o in answer[0]] == ["naive 64", "naive 32"]
    after = _pids(two_cpus)
    assert len(set(after) - set(before)) == 1 and len(after) == 2  # one fresh worker
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p0", "p1", "p2", "warm"]


def test_a_point_whose_worker_dies_twice_fails_with_the_reason(two_cpus, tmp_path, monkeypatch):
    monkeypatch.setenv(DIE_ON_ENV, "naive:64:2")
    chains = [[_job(0, tmp_path, seq_len=64), _job(1, tmp_path)]]
    (dead, after) = two_cpus.run(chains, Said().hooks())[0]
    reason = dead.value["failed"]
    assert reason.startswith("its worker died: ") and dead.placement is None
    assert reason.endswith(f" (tried on {ATTEMPTS} workers)")
    # between them, Ray's error: its class (one of RayActorError's) and its first line
    said = reason.removeprefix("its worker died: ").removesuffix(f" (tried on {ATTEMPTS} workers)")
    kind, _, line = said.partition(": ")
    assert issubclass(getattr(ray.exceptions, kind), RayActorError) and line, reason
    assert after.value.label == "naive 32" and after.placement.attempts == 1
    assert len(_pids(two_cpus)) == 2


def test_each_gpu_point_runs_on_a_worker_with_a_whole_gpu_of_its_own(two_gpus, tmp_path):
    chains = [[_job(0, tmp_path, ray_points.where, device="auto")],
              [_job(1, tmp_path, ray_points.where, device="auto")]]  # fmt: skip
    values = [chain[0].value for chain in two_gpus.run(chains, Said().hooks())]
    assert two_gpus.kind == "GPU" and two_gpus._pool_options["num_gpus"] == 1
    assert [len(v["gpus"]) for v in values] == [1, 1]  # one GPU id each
    assert values[0]["gpus"] != values[1]["gpus"]  # never the same GPU
    assert values[0]["pid"] != values[1]["pid"]  # two workers, side by side
    assert ray.available_resources().get("GPU", 0) == 1  # two workers hold two of the three


def test_a_point_from_a_broken_cuda_context_runs_again_on_a_fresh_worker(two_gpus, tmp_path):
    job = _job(0, tmp_path, partial(ray_points.breaks_once, str(tmp_path)), device="auto")
    (outcome,) = two_gpus.run([[job]], Said().hooks())[0]
    broken_pid = int((tmp_path / "broken").read_text())
    assert outcome.value == {"pid": outcome.value["pid"], "broken": False}  # the healthy run's
    assert outcome.value["pid"] != broken_pid  # on another worker
    assert outcome.placement.attempts == 2
    assert outcome.value["pid"] in _pids(two_gpus) and broken_pid not in _pids(two_gpus)


def test_a_point_from_a_broken_context_is_kept_on_its_last_attempt(two_gpus, tmp_path):
    job = _job(0, tmp_path, ray_points.breaks_always, device="auto")
    (outcome,) = two_gpus.run([[job]], Said().hooks())[0]
    assert outcome.value["broken"] is True and outcome.placement.attempts == ATTEMPTS


def test_ctrl_c_cancels_what_is_running_and_what_is_left(two_cpus, tmp_path):
    said = Said(stop_at=2)  # the second point's start: the first is in flight
    chains = [[_job(0, tmp_path), _job(1, tmp_path)], [_job(2, tmp_path)]]
    answer = two_cpus.run(chains, said.hooks())
    cancelled = Outcome({"failed": CANCELLED}, None)
    assert answer == [[cancelled, cancelled], [cancelled]]
    assert two_cpus._pool == []  # its workers stopped; the next job starts fresh ones


def test_the_pool_is_kept_while_it_fits_and_replaced_when_the_kind_changes(
    cluster, tmp_path, monkeypatch
):
    """An executor of its own, empty at the start, closed at the end: the module's executors
    keep their size and kind whichever test runs first."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    executor = RayExecutor(None)
    try:
        executor.run([[_job(0, tmp_path)]], Said().hooks())
        assert executor.kind == "CPU" and len(executor._pool) == 1  # one point: one worker
        first = executor._pool[0]
        env = {"env_vars": {"PYTHONPATH": str(CHECKOUT)}}  # workers import this checkout
        assert executor._pool_options == {"num_cpus": 1, "runtime_env": env}
        executor.run([[_job(1, tmp_path)], [_job(2, tmp_path)]], Said().hooks())
        assert executor._pool[0] is first and len(executor._pool) == 2  # kept, one added
        monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
        gpus_free = ray.available_resources().get("GPU", 0)
        gpu = [[_job(3, tmp_path, ray_points.where, device="auto")]]
        (outcome,) = executor.run(gpu, Said().hooks())[0]
        env = {"env_vars": {"PYTHONPATH": f"{CHECKOUT}{os.pathsep}/somewhere/else"}}
        assert executor._pool_options == {"num_gpus": 1, "runtime_env": env}
        assert executor.kind == "GPU" and len(executor._pool) == 1
        assert executor._pool[0] is not first and len(outcome.value["gpus"]) == 1
        assert ray.available_resources().get("GPU", 0) == gpus_free - 1  # a whole GPU
    finally:
        executor.close()
