"""Points for tests/jobs/test_ray_schedule.py, run by real Ray workers
(which import them from this checkout): where a point ran, a point that leaves its worker's
CUDA context broken, and trivial points that write files, end their chain or raise."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


def unavailable(workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    return {"unavailable": True, "pid": os.getpid()}


def raises(workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    raise ValueError("this point's own error\nits second line")


def breaks_always(workload: Any, out: Path, progress: Any) -> dict[str, Any]:
    """Every run leaves its worker's context broken: the last attempt's record is kept."""
    import profiling.jobs.ray as on_ray

    on_ray._cuda_broken = lambda job: True
    return {"pid": os.getpid(), "broken": True}
