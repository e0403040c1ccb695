"""Points for tests/jobs/test_ray_schedule.py, run by real Ray workers
(which import them from this checkout): where a point ran, a point that leaves its worker's
CUDA context broken, and trivial points that write files, end their chain or raise; and, for
the test process, a job of one such point and the hooks that record what a run said."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiling.jobs.executor import Hooks, PointJob
from profiling.workload.spec import Workload


def where(workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    """The worker's process and the GPUs Ray gave it (its CUDA_VISIBLE_DEVICES)."""
    import ray

    return {"pid": os.getpid(), "gpus": [str(g) for g in ray.get_gpu_ids()],
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")}  # fmt: skip


def breaks_once(marks: str, workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    """The first time in a job (a mark file in `marks`), the point leaves its worker's CUDA
    context broken, as an illegal memory access does: the worker's check after the point
    (profiling.jobs.ray._cuda_broken) then finds it so. Later runs are healthy."""
    mark = Path(marks) / "broken"
    try:
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return {"pid": os.getpid(), "broken": False}
    mark.write_text(str(os.getpid()))
    import profiling.jobs.ray as on_ray

    on_ray._cuda_broken = lambda job: True  # this process's context: unusable from now on
    return {"pid": os.getpid(), "broken": True}


def failed(reason: str) -> dict[str, Any]:
    return {"failed": reason}


@dataclass(frozen=True)
class Written:
    """A record whose paths lie in the point's folder, as a real job's record does."""

    label: str
    pid: int
    trace: Path
    extras: tuple[Path, ...]
    kept: Path  # a path outside the point's folder: never moved


def writes(workload: Any, out: Path, progress: Any) -> Written:
    """Reports halfway (where the die hook acts), then writes two files, one in a subfolder."""
    progress(0.5, "half")
    (out / "sub").mkdir(parents=True)
    (out / "trace.txt").write_text(f"{workload.variant} {workload.seq_len}")
    (out / "sub" / "extra.bin").write_bytes(bytes([0, 1, 2, 255]))
    return Written(f"{workload.variant} {workload.seq_len}", os.getpid(), out / "trace.txt",
                   (out / "sub" / "extra.bin",), Path("/nowhere/kept"))  # fmt: skip


def meets(folder: str, workload: Any, out: Path, progress: Any) -> Written:
    """Runs until both points of a pair have started (a mark each in `folder`), then past two
    of the driver's polls, then writes: so a progress line is said while both run, however
    warm their workers were."""
    Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(list(Path(folder).iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1.2)  # POLL_SECONDS is 0.5
    return writes(workload, out, progress)


def unavailable(workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    return {"unavailable": True, "pid": os.getpid()}


def raises(workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    raise ValueError("this point's own error\nits second line")


def breaks_always(workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    """Every run leaves its worker's context broken: the last attempt's record is kept."""
    import profiling.jobs.ray as on_ray

    on_ray._cuda_broken = lambda job: True
    return {"pid": os.getpid(), "broken": True}


# -- the test process's side ---------------------------------------------------------------------


def point_job(index: int, out: Path, run=None, seq_len: int = 32, device: str = "cpu"):
    """Point `index` of a tiny CPU workload, run by `run` (default: writes) into out/p{index}."""
    workload = Workload.from_user(variant="naive", device=device, seq_len=seq_len, batch=1,
                                  heads=2, head_dim=32, dtype="float32", steps=1)  # fmt: skip
    return PointJob(index, f"point {index}", workload, run or writes, out / f"p{index}", failed)


class Said:
    """The hooks a job hands its executor, recording what the executor told them."""

    def __init__(self, stop_at: int = 0) -> None:
        self.reports: list[tuple[float, str]] = []
        self.starts = 0
        self.stop_at = stop_at  # the start that raises KeyboardInterrupt (Ctrl-C); 0: none

    def before(self) -> None:
        self.starts += 1
        if self.starts == self.stop_at:
            raise KeyboardInterrupt

    def hooks(self) -> Hooks:
        return Hooks(self.report, self.before, _unavailable)

    def report(self, fraction: float, text: str) -> None:
        self.reports.append((fraction, text))


def _unavailable(value: Any) -> bool:
    return isinstance(value, dict) and value.get("unavailable", False)
