"""The "which attn_implementation?" table, and the step's split per implementation."""

from __future__ import annotations

import pandas as pd

from profiling.analysis.model.step import ATTENTION, CATEGORIES, IDLE
from profiling.run.model.result import ImplementationRun, ModelRun

BUSY, IDLE_SHARE = "GPU busy ms/step", "idle % of step"
COLUMNS = [
    "implementation", "step ms (trace)", BUSY, IDLE_SHARE, "timed ms", "× eager",
    "attention ms", "attention %", "SDPA backend", "pad FLOPs %", "logits err", "tokens/s", "ran",
]  # fmt: skip
# A GPU step idle for more than this share of its span waits on the host (launches, Python):
# its span is the host's pace, widened under the profiler; its busy time is the GPU's work.
HOST_BOUND_IDLE = 0.2
BUSY_WHY = (
    "GPU busy = the trace's step less its idle gaps (the union of its kernels): what the GPU "
    "did. The profiler widens a host-bound step's launch gaps, not its kernels, so the traced "
    "step is not the GPU's time; the busy time matched a CUDA-graph replay of the same decode "
    "within 0.3% on an H100 (docs/results-model.md)"
)


def step_ms(item: ImplementationRun) -> float | None:
    """The step's time from the trace (GPU span on a GPU, the step span on a CPU)."""
    return item.split.step_us / 1e3 if item.split else None


def busy_ms(item: ImplementationRun) -> float | None:
    """The GPU's busy time a step from the trace: the span less its idle gaps (each kernel's
    time counted once); None on a CPU, where nothing idles in the split."""
    split = item.split
    if split is None or not split.on_gpu:
        return None
    return (split.step_us - split.categories.get(IDLE, 0.0)) / 1e3


def idle_share(item: ImplementationRun) -> float | None:
    """The share of the traced GPU step the GPU sat idle (None on a CPU)."""
    split = item.split
    if split is None or not split.on_gpu or not split.step_us:
        return None
    return split.categories.get(IDLE, 0.0) / split.step_us


def host_bound(result: ModelRun) -> bool:
    """Whether the views show the GPU's busy time: a decode on a GPU, or any GPU step idle for
    more than HOST_BOUND_IDLE of its span."""
    shares = [idle_share(item) for item in result.runs if item.ok]
    shares = [share for share in shares if share is not None]
    decode = result.workload.get("mode") == "decode"
    return bool(shares) and (decode or max(shares) > HOST_BOUND_IDLE)


def by_bare_timing(result: ModelRun) -> bool:
    """A decode is ranked by its bare timing: the profiler lengthens host-bound steps, and by
    different amounts for different implementations (docs/results-model.md)."""
    ran = [item for item in result.runs if item.ok]
    return result.workload.get("mode") == "decode" and all(item.timed_ms for item in ran)


def ranked_ms(result: ModelRun, item: ImplementationRun) -> float | None:
    """The time the verdict and `× eager` compare: the bare timing for a decode, else the
    trace's step."""
    return item.timed_ms if by_bare_timing(result) else step_ms(item)


def comparison(result: ModelRun) -> pd.DataFrame:
    """One row per implementation: time, attention's share, backend, pads, error; a refused or
    failed one says why in `ran`. A host-bound run adds the GPU's busy time and idle share."""
    eager = next(
        (ranked_ms(result, item) for item in result.runs if item.id == "eager" and item.ok), None
    )
    shown = host_bound(result)
    rows = []
    for item in result.runs:
        if not item.ok:
            rows.append({"implementation": item.id, "ran": item.refused or item.failed})
            continue
        ms, busy, idle = ranked_ms(result, item), busy_ms(item), idle_share(item)
        rows.append({
            "implementation": item.id,
            "step ms (trace)": round(step_ms(item), 3),
            BUSY: round(busy, 3) if shown and busy is not None else None,
            IDLE_SHARE: round(100 * idle, 1) if shown and idle is not None else None,
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
    # a prefill has no tokens/s, a decode no pad FLOPs, a CPU or a GPU-bound run no busy time
    return frame.dropna(axis=1, how="all")


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
    """The fastest implementation that ran, and the slowest, by `ranked_ms` (a decode by its
    wall without the profiler); for a host-bound run a second paragraph: each one's GPU busy
    time, its share of that wall, and why the busy time is the GPU's and the span is not."""
    ran = [item for item in result.runs if item.ok]
    if not ran:
        return "no implementation ran: see each one's reason"
    timed = [(ranked_ms(result, item), item.id) for item in ran]
    best_ms, best = min(timed)
    worst_ms, worst = max(timed)
    which = "wall timed without the profiler" if by_bare_timing(result) else "from the trace"
    said = (
        f"which attn_implementation? {best}: {best_ms:.2f} ms a step on {result.device} "
        f"({result.text}; {which}); slowest {worst}: {worst_ms:.2f} ms"
    )
    return said + ("\n\n" + busy_line(result) if host_bound(result) else "")


def busy_line(result: ModelRun) -> str:
    """Each implementation's GPU busy ms/step, its share of its wall, and BUSY_WHY."""
    parts = []
    for item in result.runs:
        busy, idle = busy_ms(item), idle_share(item)
        if not item.ok or busy is None or idle is None:
            continue
        wall = item.timed_ms
        of_wall = f", {100 * busy / wall:.0f}% of its {wall:.2f} ms wall" if wall else ""
        parts.append(
            f"{item.id} {busy:.2f} ms ({100 * idle:.0f}% of the traced step idle{of_wall})"
        )
    return f"{BUSY} (the GPU's work, from the trace): {'; '.join(parts)}. {BUSY_WHY}."


def sweep(points) -> pd.DataFrame:
    """A model Sweep's table: one row per (S, implementation), the step's time (and a host-bound
    point's GPU busy time) and attention's share; a refused length or implementation says why."""
    rows = []
    for point in points:
        if point.result is None:
            rows.append({"S": point.seq_len, "ran": point.refused})
            continue
        shown = host_bound(point.result)
        for item in point.result.runs:
            if not item.ok:
                rows.append({"S": point.seq_len, "implementation": item.id,
                             "ran": item.refused or item.failed})  # fmt: skip
                continue
            rows.append({
                "S": point.seq_len, "implementation": item.id,
                "step ms (trace)": round(step_ms(item), 3),
                BUSY: round(busy_ms(item), 3) if shown and busy_ms(item) is not None else None,
                "attention %": round(100 * item.split.attention_share, 1),
                "SDPA backend": item.backend or "", "ran": item.ran,
            })  # fmt: skip
    columns = ["S", "implementation", "step ms (trace)", BUSY, "attention %", "SDPA backend", "ran"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame if frame[BUSY].notna().any() else frame.drop(columns=BUSY)
