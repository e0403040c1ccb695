"""A model Sweep (issue 43): one model workload's implementations over sequence lengths, one
model run per length, one after another. Every length's workload is validated before the first
run (a bad length refuses the whole sweep); a length the memory estimate or the CPU budget
refuses is kept as a refused point with its reason, and the sweep goes on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from profiling.run.model.result import ModelRun
from profiling.run.model.runner import run
from profiling.user_values import ConfigError
from profiling.workload.model.spec import ModelWorkload

MAX_POINTS = 8


@dataclass
class SweepPoint:
    seq_len: int
    result: ModelRun | None = None
    refused: str = ""


def sweep_workloads(workload: ModelWorkload, seq_lens: Sequence[int]) -> list[ModelWorkload]:
    """One workload per length, each validated; ragged lengths belong to one S, so refused."""
    if not seq_lens or len(seq_lens) > MAX_POINTS:
        raise ConfigError(
            f"a model sweep takes 1 to {MAX_POINTS} sequence lengths, got {len(seq_lens)}"
        )
    if workload.lengths is not None:
        raise ConfigError(
            "a model sweep runs full batches: leave lengths out (they fit one seq_len)"
        )
    if len(set(seq_lens)) != len(seq_lens):
        raise ConfigError("a model sweep takes each sequence length once")
    return [replace(workload, seq_len=seq_len).validated() for seq_len in sorted(seq_lens)]


def sweep(
    workload: ModelWorkload, seq_lens: Sequence[int], out: Path,
    progress: Callable[[float, str], None] | None = None,
) -> list[SweepPoint]:  # fmt: skip
    """Each length's model run, in order; a refused length is a point with its reason."""
    points = []
    workloads = sweep_workloads(workload, seq_lens)
    for index, point in enumerate(workloads):
        if progress is not None:
            progress(index / len(workloads), f"S={point.seq_len}")
        try:
            points.append(SweepPoint(point.seq_len, run(point, out / f"S{point.seq_len}")))
        except ConfigError as exc:
            points.append(SweepPoint(point.seq_len, refused=str(exc)))
    return points
