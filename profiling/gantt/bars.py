"""The Gantt's bars as plain data: legend group, colour, hover text and label per span.

No plotly here: profiling.gantt.spec turns each legend group's arrays into a bar trace, and
profiling.run.records builds a run's bars with the same helpers, so both paths write the same
hover text and colours.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from profiling.kernels.names import classify, short_name
from profiling.trace.events import span_args
from profiling.trace.query import is_in, per_value

MAX_HOVER_NAME = 240  # characters of a kernel's full name in the hover box
HOVER_WRAP = 100  # characters per hover line
MAX_LINKS = 3_000  # launch → kernel segments drawn (only between individually drawn spans)

# Colour per legend group. Kernels are split by what they compute (kernels.classify), so the
# math backend's 20 kernels read as gemm / elementwise / reduction at a glance.
COLOURS: dict[str, str] = {
    "annotation": "#b8bcc6",
    "cpu op": "#4c78a8",
    "python": "#9d9da1",
    "runtime": "#f58518",
    "driver": "#b2612b",
    "gpu annotation": "#c9b3e6",
    "kernel · fused attention": "#d6336c",
    "kernel · gemm": "#2f9e44",
    "kernel · softmax": "#e03131",
    "kernel · reduction": "#a9a12b",
    "kernel · elementwise": "#1aa1a1",
    "kernel · triton": "#9c36b5",
    "kernel · other": "#6b7d6b",
    "kernel · memcpy": "#f2c12e",
    "kernel · memset": "#ffd8a8",
    "memcpy": "#f2c12e",
    "memset": "#ffd8a8",
    # kernels whose role in attention is known (profiling.kernels.roles) are coloured by it
    "role · QKᵀ": "#40c057",
    "role · PV": "#8ce99a",
    "role · matmul": "#099268",
    "role · scale": "#15aabf",
    "role · mask": "#fd7e14",
    "role · softmax": "#c92a2a",
    "role · cast/upcast": "#7048e8",
    "role · copy": "#fab005",
    "role · workspace": "#ffe8cc",
    "role · fused attention forward": "#a61e4d",
    "role · backward pre-processing": "#a5d8ff",
    "role · dQ/dK/dV": "#1864ab",
    "role · split-KV combine": "#be4bdb",
    "role · L2 flush (cold-l2 timing, not attention)": "#dee2e6",
}
_FALLBACK = ["#72b7b2", "#e45756", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d"]
# kernel args shown in the hover box, in this order: (key in the trace, label)
HOVER_ARGS: tuple[tuple[str, str], ...] = (
    ("grid", "grid"),
    ("block", "block"),
    ("registers per thread", "registers/thread"),
    ("shared memory", "shared memory (B)"),
    ("est. achieved occupancy %", "occupancy %"),
    ("bytes", "bytes"),
    ("memory bandwidth (GB/s)", "bandwidth GB/s"),
    ("correlation", "correlation"),
)


@dataclass
class CategoryArrays:
    """The bars of one legend group, as plain arrays (what a level-of-detail step would thin)."""

    name: str
    base: np.ndarray  # start, µs
    dur: np.ndarray  # duration, µs
    row: list[str]  # y category per bar
    hover: list[str]  # escaped hover text per bar
    text: list[str]  # escaped in-bar label (hidden by plotly when it does not fit)
    index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # span rows


def legend_group(spans: pd.DataFrame, roles: np.ndarray | None = None) -> pd.Series:
    """Legend group per span: the span's category, kernels refined by their role in
    attention where it is known (`roles`, one per row), else by what they compute."""
    return pd.Series(_legend_groups(spans, roles), index=spans.index)


def column_strings(column: pd.Series) -> np.ndarray:
    """A column as an object array of str (missing reads "nan", as astype(str))."""
    return per_value(column, str, "nan")


def legend_group_of(category: str, name: str, role: str = "") -> str:
    """One span's legend group (what `_legend_groups` gives each row)."""
    if category != "kernel":
        return category
    return f"role · {role}" if role else f"kernel · {classify(name)}"


def _legend_groups(spans: pd.DataFrame, roles: np.ndarray | None = None) -> np.ndarray:
    group = column_strings(spans["category"])
    is_kernel = group == "kernel"
    if is_kernel.any():
        kind = per_value(spans["name"], lambda n: classify(str(n)), "")[is_kernel]
        group[is_kernel] = "kernel · " + kind
        if roles is not None:
            known = is_kernel & (roles != "")
            group[known] = "role · " + roles[known]
    return group


def format_us(value: float) -> str:
    return f"{value:,.3f} µs" if value < 10 else f"{value:,.1f} µs"


def wrap_hover(text: str, width: int = HOVER_WRAP) -> str:
    """Break a long name into lines; `<br>` is added after escaping, so it stays markup."""
    lines = [text[i : i + width] for i in range(0, len(text), width)] or [""]
    return "<br>".join(html.escape(line, quote=False) for line in lines)


def _arg_text(args: Any) -> str:
    if not isinstance(args, dict):
        return ""
    parts = []
    for key, label in HOVER_ARGS:
        value = args.get(key)
        if value is None:
            continue
        if isinstance(value, list):
            value = "×".join(str(v) for v in value)
        elif isinstance(value, float):
            value = f"{value:,.3g}"
        parts.append(f"{label}: {html.escape(str(value), quote=False)}")
    return "<br>".join(parts)


def hover_text(
    name: str, gpu: bool, group: str, lane: str, dur: float, start: float, step: Any, args: Any
) -> str:
    lines = [_hover_head(name, gpu, group, lane)]
    lines.append(f"duration {format_us(dur)} · start {format_us(start)}")
    if isinstance(step, (int, np.integer)) and step >= 0:
        lines.append(f"profiler step {int(step)}")
    detail = _arg_text(span_args(args)) if gpu else ""
    if detail:
        lines.append(detail)
    return "<br>".join(lines)


@lru_cache(maxsize=65536)
def _hover_head(name: str, gpu: bool, group: str, lane: str) -> str:
    """The name, group and lane lines: the same for every span of one name in one lane."""
    short = short_name(name) if gpu else name
    lines = [f"<b>{wrap_hover(short[:MAX_HOVER_NAME])}</b>"]
    if gpu and short != name:
        clipped = name if len(name) <= MAX_HOVER_NAME else name[: MAX_HOVER_NAME - 1] + "…"
        lines.append(wrap_hover(clipped))
    lines.append(f"{html.escape(group, quote=False)} · {html.escape(lane, quote=False)}")
    return "<br>".join(lines)


@lru_cache(maxsize=65536)
def bar_label(name: str, gpu: bool) -> str:
    return html.escape(short_name(name) if gpu else name, quote=False)


def category_arrays(
    spans: pd.DataFrame, rows_of_span: Sequence[str], roles: np.ndarray | None = None
) -> dict[str, CategoryArrays]:
    """Spans grouped into per-legend-group arrays, in a stable, readable legend order.

    Columns are read once as arrays and each bar's text built from them: pandas'
    to_dict("records") alone cost more than the rest of a run's figure.
    """
    if spans.empty:
        return {}
    n = len(spans)
    groups = _legend_groups(spans, roles)
    name, lane = column_strings(spans["name"]), column_strings(spans["lane"])
    gpu = is_in(spans["kind"], "gpu")
    start = spans["start_us"].to_numpy(dtype=float)
    dur = spans["dur_us"].to_numpy(dtype=float)
    step = spans["step"].to_numpy() if "step" in spans else np.full(n, None, dtype=object)
    args = spans["args"].to_numpy(dtype=object) if "args" in spans else np.full(n, None)
    rows = np.asarray(rows_of_span, dtype=object)
    out: dict[str, CategoryArrays] = {}
    for group in group_order(groups):
        idx = np.flatnonzero(groups == group)
        out[group] = CategoryArrays(
            name=group,
            base=start[idx],
            dur=dur[idx],
            row=list(rows[idx]),
            hover=[
                hover_text(name[i], gpu[i], group, lane[i], dur[i], start[i], step[i], args[i])
                for i in idx.tolist()
            ],
            text=[bar_label(name[i], gpu[i]) for i in idx.tolist()],
            index=idx,
        )
    return out


def group_order(groups: Sequence[str] | np.ndarray) -> list[str]:
    known = [g for g in COLOURS if g in set(groups)]
    return known + sorted(set(groups) - set(known))


def colour(group: str, i: int = 0) -> str:
    return COLOURS.get(group, _FALLBACK[i % len(_FALLBACK)])


def link_segments(
    spans: pd.DataFrame, rows_of_span: Sequence[str], limit: int = MAX_LINKS
) -> tuple[list, list]:
    """x and y of launch → GPU-work segments, separated by None (one Scatter trace draws all).

    `spans` may be a subset of a trace: `link` holds row numbers of the full table, so the
    counterpart is looked up by index label and links to spans not drawn are skipped.
    """
    if spans.empty or "link" not in spans:
        return [], []
    link = spans["link"].to_numpy(dtype=np.int64)
    gpu = np.flatnonzero(is_in(spans["kind"], "gpu") & (link >= 0))
    launch = spans.index.get_indexer(link[gpu])
    ok = launch >= 0
    gpu, launch = gpu[ok][:limit], launch[ok][:limit]
    if not len(gpu):
        return [], []
    starts = spans["start_us"].to_numpy(dtype=float)
    rows = np.asarray(rows_of_span, dtype=object)
    n = len(gpu)
    xs = np.empty(3 * n, dtype=object)
    ys = np.empty(3 * n, dtype=object)
    xs[0::3], xs[1::3], xs[2::3] = starts[launch], starts[gpu], None
    ys[0::3], ys[1::3], ys[2::3] = rows[launch], rows[gpu], None
    return xs.tolist(), ys.tolist()
