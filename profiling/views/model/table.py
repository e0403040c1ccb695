"""The "which attn_implementation?" table, and the step's split per implementation."""

from __future__ import annotations

import pandas as pd

from profiling.analysis.model.step import ATTENTION, CATEGORIES
from profiling.run.model.result import ImplementationRun, ModelRun

COLUMNS = [
    "implementation", "step ms (trace)", "timed ms", "× eager", "attention ms", "attention %",
    "SDPA backend", "pad FLOPs %", "logits err", "tokens/s", "ran",
]  # fmt: skip


def step_ms(item: ImplementationRun) -> float | None:
    """The step's time from the trace (GPU span on a GPU, the step span on a CPU)."""
    return item.split.step_us / 1e3 if item.split else None


def comparison(result: ModelRun) -> pd.DataFrame:
    """One row per implementation: time, attention's share, backend, pads, error; a refused or
    failed one says why in `ran`."""
    eager = next((step_ms(item) for item in result.runs if item.id == "eager" and item.ok), None)
    rows = []
    for item in result.runs:
        if not item.ok:
            rows.append({"implementation": item.id, "ran": item.refused or item.failed})
            continue
        ms = step_ms(item)
        rows.append({
            "implementation": item.id,
            "step ms (trace)": round(ms, 3),
            "timed ms": round(item.timed_ms, 3) if item.timed_ms is not None else None,
            "× eager": round(eager / ms, 2) if eager and ms else None,
            "attention ms": round(item.split.categories[ATTENTION] / 1e3, 3),
            "attention %": round(100 * item.split.attention_share, 1),
            "SDPA backend": item.backend or "",
            "pad FLOPs %": round(100 * item.pad.pad_share, 1) if item.pad else None,
            "logits err": f"{item.logits_error:.1e}" if item.logits_error is not None else "",
            "tokens/s": round(item.tokens_per_s) if item.tokens_per_s else None,
            "ran": item.ran + (f" ({item.note})" if item.note else ""),
        })  # fmt: skip
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.dropna(axis=1, how="all")  # a prefill has no tokens/s, a decode no pad FLOPs


def categories(result: ModelRun) -> pd.DataFrame:
    """µs per step by category, one row per implementation that ran; they add up to `step µs`."""
    rows = []
    for item in result.runs:
        if item.ok:
            found = {name: round(item.split.categories.get(name, 0.0), 1) for name in CATEGORIES}
            rows.append(
                {"implementation": item.id, "step µs": round(item.split.step_us, 1), **found}
            )
    return pd.DataFrame(rows, columns=["implementation", "step µs", *CATEGORIES])


def layers(result: ModelRun) -> pd.DataFrame:
    """Attention's share of each decoder layer, per implementation that ran."""
    rows = []
    for item in result.runs:
        if not item.ok:
            continue
        for index, total, attention in item.split.layers:
            share = 100 * attention / total if total else 0.0
            rows.append({
                "implementation": item.id, "layer": index, "layer µs": round(total, 1),
                "attention µs": round(attention, 1), "attention %": round(share, 1),
            })  # fmt: skip
    return pd.DataFrame(
        rows, columns=["implementation", "layer", "layer µs", "attention µs", "attention %"]
    )


def verdict(result: ModelRun) -> str:
    """One line: the fastest implementation that ran, and the slowest. A decode is ranked by
    its bare timing: the profiler lengthens host-bound steps, and by different amounts for
    different implementations (docs/results-model.md)."""
    ran = [item for item in result.runs if item.ok]
    if not ran:
        return "no implementation ran: see each one's reason"
    bare = result.workload.get("mode") == "decode" and all(item.timed_ms for item in ran)
    timed = [(item.timed_ms if bare else step_ms(item), item.id) for item in ran]
    best_ms, best = min(timed)
    worst_ms, worst = max(timed)
    which = "timed without the profiler" if bare else "from the trace"
    return (
        f"which attn_implementation? {best}: {best_ms:.2f} ms a step on {result.device} "
        f"({result.text}; {which}); slowest {worst}: {worst_ms:.2f} ms"
    )


def sweep(points) -> pd.DataFrame:
    """A model Sweep's table: one row per (S, implementation), the step's time and attention's
    share; a refused length or implementation says why."""
    rows = []
    for point in points:
        if point.result is None:
            rows.append({"S": point.seq_len, "ran": point.refused})
            continue
        for item in point.result.runs:
            if not item.ok:
                rows.append({"S": point.seq_len, "implementation": item.id,
                             "ran": item.refused or item.failed})  # fmt: skip
                continue
            rows.append({
                "S": point.seq_len, "implementation": item.id,
                "step ms (trace)": round(step_ms(item), 3),
                "attention %": round(100 * item.split.attention_share, 1),
                "SDPA backend": item.backend or "", "ran": item.ran,
            })  # fmt: skip
    columns = ["S", "implementation", "step ms (trace)", "attention %", "SDPA backend", "ran"]
    return pd.DataFrame(rows, columns=columns)
