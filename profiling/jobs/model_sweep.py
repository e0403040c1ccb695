"""A model Sweep (issue 43): one model workload's implementations over sequence lengths, one
model run per length, one after another. Every length's workload is validated before the first
run (a bad length refuses the whole sweep); a length the memory estimate or the CPU budget
refuses is kept as a refused point with its reason, and the sweep goes on. The lengths may come
from an API call: `sweep_request` reads them loosely (a list, or "256,512") and checks each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profiling.run.model.result import ModelRun
from profiling.run.model.runner import run
from profiling.user_values import ConfigError
from profiling.workload.model.spec import ModelWorkload, whole_numbers
from profiling.workload.spec import resolve_device

MAX_POINTS = 8


@dataclass
class SweepPoint:
    seq_len: int
    result: ModelRun | None = None
    refused: str = ""
    # the point's workload as plain data (its text, the device it was for): what the run store
    # keeps of a refused length, once per implementation asked for
    workload: dict[str, Any] = field(default_factory=dict)


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


def sweep_request(seq_lens: Any, **fields: Any) -> list[ModelWorkload]:
    """A caller's sweep (the page's, an API call's): the lengths as a list or comma-separated
    text, the model's fields as ModelWorkload.from_user reads them; every point validated."""
    lengths = whole_numbers("seq_lens", seq_lens, MAX_POINTS) or ()
    if not lengths:
        raise ConfigError(f"seq_lens: give 1 to {MAX_POINTS} sequence lengths, e.g. [32, 64]")
    base = ModelWorkload.from_user(seq_len=max(lengths), **fields)
    return sweep_workloads(base, lengths)


def _plain(workload: ModelWorkload, device: str) -> dict[str, Any]:
    return {**workload.__dict__, "device": device, "text": workload.text()}


def sweep(
    workload: ModelWorkload, seq_lens: Sequence[int], out: Path,
    progress: Callable[[float, str], None] | None = None,
) -> list[SweepPoint]:  # fmt: skip
    """Each length's model run, in order; a refused length is a point with its reason."""
    return sweep_points(sweep_workloads(workload, seq_lens), out, progress)


def sweep_points(
    workloads: Sequence[ModelWorkload], out: Path,
    progress: Callable[[float, str], None] | None = None,
) -> list[SweepPoint]:  # fmt: skip
    """The validated points' runs, in order, each in its own folder under `out`."""
    points = []
    device = resolve_device(workloads[0].device) if workloads else "cpu"
    for index, point in enumerate(workloads):
        if progress is not None:
            progress(index / len(workloads), f"S={point.seq_len}")
        try:
            result = run(point, out / f"S{point.seq_len}")
            points.append(SweepPoint(point.seq_len, result, workload=_plain(point, device)))
        except ConfigError as exc:
            points.append(
                SweepPoint(point.seq_len, refused=str(exc), workload=_plain(point, device))
            )
    return points
