"""The counters beside what exists: the profiled kernels, the modelled roofline.

ncu's kernels (one measured step, launch order) are matched to one profiled step's kernels
(each phase's first step, phases in order) by function name in launch order: each ncu kernel
takes the next profiled kernel of its name, so a kernel ncu did not reach (its cap) or one the
profiled phases do not hold is left unmatched, and counted in the match's words. Per profiled
kernel name the matched calls' figures are averaged. No torch here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from profiling.analysis.columns import GLANCE_COUNTER_COLUMNS
from profiling.analysis.counters import Counters

MEASURED = [
    "ncu_us",
    "dram_read_bytes",
    "dram_write_bytes",
    "achieved_occupancy_pct",
    "tensor_pipe_pct",
    "sm_throughput_pct",
    "dram_throughput_pct",
    "l2_hit_pct",
]
NOT_KERNELS = ("Memcpy", "Memset")  # the profiler's names for copies and memsets
ACHIEVED_NOTE = "achieved (ncu: sm__warps_active), replacing CUPTI's estimate"
_SCOPE = re.compile(r"\((anonymous namespace)\)|<unnamed>|\(anonymous namespace\)")


def function_name(name: str) -> str:
    """A kernel's function, without return type, namespaces and template arguments: what
    both torch's trace and ncu's report call it."""
    text = _SCOPE.sub("", str(name)).strip()
    text = text.removeprefix("void ").strip()
    text = re.split(r"[<(]", text, maxsplit=1)[0]
    return text.rsplit("::", 1)[-1].strip()


def step_kernels(phases: Mapping[str, Any], copies: bool = False) -> list[tuple[str, str]]:
    """(phase, full name) of one profiled step's kernels: each phase's first step, in order
    (a phase's spans hold its `steps` steps' kernels one after another). Copies and memsets
    are left out (unless `copies`): they are not kernels, and ncu profiles kernels only."""
    kernels = []
    for phase, figures in phases.items():
        names = figures.spans.names
        per_step = len(names) // max(int(figures.steps), 1)
        kernels += [(phase, str(n)) for n in names[:per_step]
                    if copies or not str(n).startswith(NOT_KERNELS)]  # fmt: skip
    return kernels


def match(profiled: Sequence[tuple[str, str]], measured: pd.DataFrame) -> tuple[list[int], str]:
    """For each ncu kernel, the position of its profiled kernel (-1: none), and the words
    that say how they were matched."""
    wanted = [function_name(name) for _, name in profiled]
    positions = []
    start = 0
    for kernel in measured["kernel"].astype(str):
        found = next((i for i in range(start, len(wanted)) if wanted[i] == function_name(kernel)),
                     -1)  # fmt: skip
        positions.append(found)
        start = found + 1 if found >= 0 else start
    matched = sum(p >= 0 for p in positions)
    words = (
        f"ncu measured {len(positions)} kernels of one step; {matched} of the profiled step's "
        f"{len(profiled)} matched to them by function name in launch order"
    )
    if matched < len(profiled):
        words += f"; {len(profiled) - matched} profiled not measured (ncu's cap, or not seen)"
    if matched < len(positions):
        words += f"; {len(positions) - matched} measured outside the profiled phases"
    return positions, words


def per_kernel(counters: Counters, phases: Mapping[str, Any]) -> tuple[pd.DataFrame, str]:
    """Per (phase, full name): the mean of its matched calls' figures, and the match's words."""
    profiled = step_kernels(phases)
    positions, words = match(profiled, counters.kernels)
    copies = sum(str(n).startswith(NOT_KERNELS) for _, n in step_kernels(phases, copies=True))
    if copies:
        words += f"; copies and memsets per step, not kernels (ncu measures none): {copies}"
    rows = [
        {"phase": profiled[p][0], "name": profiled[p][1],
         **{c: counters.kernels[c].iloc[i] for c in MEASURED}}
        for i, p in enumerate(positions) if p >= 0
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["phase", "name", *MEASURED])
    for column in MEASURED:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    grouped = frame.groupby(["phase", "name"], sort=False)
    means = grouped[MEASURED].mean()
    means["measured_calls"] = grouped.size()
    return means.reset_index(), words


def with_kernels(kernels: pd.DataFrame, measured: pd.DataFrame, phase: str) -> pd.DataFrame:
    """A phase's kernel table with the measured columns; the achieved occupancy in place of
    CUPTI's estimate where ncu measured it."""
    rows = measured[measured["phase"] == phase].drop(columns="phase")
    joined = kernels.merge(rows, on="name", how="left")
    achieved = joined["achieved_occupancy_pct"].notna()
    if "occupancy_pct" in joined:
        joined["occupancy_pct"] = joined["occupancy_pct"].astype(object)
        joined.loc[achieved, "occupancy_pct"] = joined.loc[achieved, "achieved_occupancy_pct"]
        joined.loc[achieved, "occupancy_note"] = ACHIEVED_NOTE
    return joined


def with_roofline(rows: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Roofline rows with the measured DRAM bytes per call, the intensity they give (the
    modelled FLOPs over them) and the gap in words."""
    cols = ["phase", "name", "dram_read_bytes", "dram_write_bytes"]
    joined = rows.merge(measured[cols], on=["phase", "name"], how="left")
    moved = joined["dram_read_bytes"] + joined["dram_write_bytes"]
    joined["measured_bytes_per_call"] = moved
    flops = pd.to_numeric(joined["flop_per_call"], errors="coerce")
    joined["measured_intensity"] = np.where(moved > 0, flops / moved, np.nan)
    joined["bytes_gap"] = [
        gap(m, r, w) for m, r, w in zip(joined["bytes_per_call"], joined["dram_read_bytes"],
                                        joined["dram_write_bytes"], strict=True)
    ]  # fmt: skip
    return joined


def gap(modelled: Any, read: Any, written: Any) -> str:
    """'modelled 50.3 MB, measured 59.2 MB (read 50.4, written 8.8)'; '' when not measured."""
    if read is None or written is None or pd.isna(read) or pd.isna(written):
        return ""
    measured = float(read) + float(written)
    said = f"measured {_mb(measured)} (read {_mb(read)}, written {_mb(written)})"
    if modelled is None or pd.isna(modelled):
        return f"not modelled, {said}"
    change = f" ({100 * (measured / float(modelled) - 1):+.0f}%)" if float(modelled) else ""
    return f"modelled {_mb(modelled)}, {said}{change}"


def _mb(value: Any) -> str:
    return f"{float(value) / 1e6:,.1f} MB"


def step_bytes(counters: Counters) -> tuple[float | None, float | None]:
    """DRAM bytes read and written by all ncu's kernels of the step (None: not measured)."""
    if not counters.measured:
        return None, None
    frame = counters.kernels
    return float(frame["dram_read_bytes"].sum()), float(frame["dram_write_bytes"].sum())


def glance_figures(counters: Counters | None) -> dict[str, Any]:
    """Compare's glance row: DRAM MB per step measured by ncu, or why there are none."""
    if counters is None:
        return {}
    read, written = step_bytes(counters)
    values = (
        read / 1e6 if read is not None else None,
        written / 1e6 if written is not None else None,
        counters.reason or f"measured ({counters.seconds:.0f} s under ncu)",
    )
    return dict(zip(GLANCE_COUNTER_COLUMNS, values, strict=True))


def glance_columns(
    rows: list[dict[str, Any]], columns: list[str], numeric: list[str]
) -> tuple[list[str], list[str]]:
    """Compare's columns and numeric columns, with the counters' last where a run has them."""
    if not any(GLANCE_COUNTER_COLUMNS[-1] in row for row in rows):
        return columns, numeric
    return [*columns, *GLANCE_COUNTER_COLUMNS], [*numeric, *GLANCE_COUNTER_COLUMNS[:2]]


def measured_roofline(
    rows: pd.DataFrame, counters: Counters | None, phases: Mapping[str, Any]
) -> pd.DataFrame:
    """Roofline rows with ncu's DRAM bytes where counters were measured; else as they were."""
    if counters is None or not counters.measured:
        return rows
    return with_roofline(rows, per_kernel(counters, phases)[0])
