"""Diff of two training traces, phase by phase: what each phase (attn_fwd, attn_bwd) costs per
step in A and in B, aligned by name ("the backward went from 2,669 to 1,892 µs; the forward
from 891 to 615 µs").

A trace without attn_bwd spans has one phase at most, and then there is nothing to align:
`phase_table` returns None and the Diff reads as before. A phase one side lacks (a forward run
against a train run) is listed with its missing side empty.
"""

from __future__ import annotations

import pandas as pd

from profiling.analysis.summary import forward_rows, forward_work, per_forward
from profiling.trace.model import Trace
from profiling.vocabulary import BACKWARD, FORWARD

PHASES = (FORWARD, BACKWARD)
PHASE_COLUMNS = [
    "phase", "steps_a", "steps_b", "kernels_a", "kernels_b", "gpu_us_a", "gpu_us_b",
    "delta_gpu_us", "cpu_us_a", "cpu_us_b", "delta_cpu_us",
]  # fmt: skip


def phase_table(a: Trace, b: Trace) -> pd.DataFrame | None:
    """Per phase present in either trace, per step of that phase: kernels, GPU µs and CPU µs
    of A and B and B − A; None when neither trace has a backward phase."""
    if not (_has(a, BACKWARD) or _has(b, BACKWARD)):
        return None
    rows = []
    for phase in PHASES:
        if not (_has(a, phase) or _has(b, phase)):
            continue
        row: dict[str, object] = {"phase": phase}
        for side, trace in (("a", a), ("b", b)):
            figures = _figures(trace, phase) if _has(trace, phase) else {}
            for name in ("steps", "kernels", "gpu_us", "cpu_us"):
                row[f"{name}_{side}"] = figures.get(name)
        for name in ("gpu_us", "cpu_us"):
            both = row[f"{name}_a"] is not None and row[f"{name}_b"] is not None
            row[f"delta_{name}"] = row[f"{name}_b"] - row[f"{name}_a"] if both else None  # type: ignore[operator]
        rows.append(row)
    return pd.DataFrame(rows, columns=PHASE_COLUMNS)


def _has(trace: Trace, phase: str) -> bool:
    return bool(len(forward_rows(trace.spans, phase)))


def _figures(trace: Trace, phase: str) -> dict[str, float | None]:
    windows, work = forward_work(trace, phase)
    stats = per_forward(trace, phase, windows=windows, work=work)
    gpu = stats.gpu_us if trace.has_gpu else None
    return {
        "steps": stats.forwards,
        "kernels": stats.kernels,
        "gpu_us": gpu,
        "cpu_us": stats.cpu_us,
    }
