"""Points for tests/jobs/test_ray_gpu.py, run by real Ray workers (which import them from this
checkout): where a point ran, and a point that leaves its worker's CUDA context broken."""

from __future__ import annotations

import os
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
