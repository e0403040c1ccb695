"""Spans table → plotly Gantt chart: one row per lane and depth, one bar per span.

Built from the trace model (profiling.trace), never from key_averages, so it draws exactly
what the exported trace holds and works the same on a trace returned from a GPU run or one
a user uploads. It is a pure function of the spans table: no torch, no gradio.

The work is split in two so a level-of-detail step can slot in between for huge traces:
`span_rows` + `category_arrays` turn spans into plain per-category arrays, and
`build_gantt` draws whatever arrays it is given.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from profiling.kernels import classify, short_name

X_TITLE = "µs from first profiled step"
LINKS_NAME = "launch → kernel"
ROW_HEIGHT = 26  # px per row; the figure's height follows the number of rows
BASE_HEIGHT = 150  # px for axes, title and margins
MIN_HEIGHT = 380
MAX_MARKERS = 60  # step lines / attn_fwd regions drawn; more would only add clutter
MAX_HOVER_NAME = 240  # characters of a kernel's full name in the hover box
HOVER_WRAP = 100  # characters per hover line
FORWARD = "attn_fwd"
_STEP_PREFIX = "ProfilerStep#"

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


def legend_group(spans: pd.DataFrame) -> pd.Series:
    """Legend group per span: the span's category, kernels refined by what they compute."""
    group = spans["category"].astype(str).copy()
    is_kernel = (spans["category"] == "kernel").to_numpy()
    if is_kernel.any():
        kinds = spans.loc[is_kernel, "name"].astype(str).map(classify)
        group.loc[is_kernel] = "kernel · " + kinds
    return group


def row_label(lane: str, depth: int, stacked: bool) -> str:
    """`CPU · thread 418 (python3) · d2` for stacked lanes, the lane itself otherwise."""
    return f"{lane} · d{depth}" if stacked else lane


def span_rows(spans: pd.DataFrame, lanes: Sequence[str] | None = None) -> tuple[list[str], list]:
    """Row label per span and the rows top to bottom: lanes in order, each split by depth.

    A lane whose spans nest (CPU threads) gets one row per depth; a flat lane (a GPU stream)
    keeps one row. Lanes listed in `lanes` but without spans get no row.
    """
    if spans.empty:
        return [], []
    lane_col = spans["lane"].astype(str).to_numpy()
    depth = spans["depth"].to_numpy(dtype=np.int64)
    order = [str(x) for x in lanes] if lanes else []
    order += [x for x in dict.fromkeys(lane_col) if x not in order]
    deepest = pd.Series(depth).groupby(lane_col).max().to_dict()
    rows: list[str] = []
    for lane in order:
        if lane not in deepest:
            continue
        stacked = deepest[lane] > 0
        rows += [row_label(lane, d, stacked) for d in range(int(deepest[lane]) + 1)]
    labels = [
        row_label(lane, int(d), deepest[lane] > 0) for lane, d in zip(lane_col, depth, strict=True)
    ]
    return labels, rows


def _fmt_us(value: float) -> str:
    return f"{value:,.3f} µs" if value < 10 else f"{value:,.1f} µs"


def _wrap(text: str, width: int = HOVER_WRAP) -> str:
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


def hover_text(span: dict[str, Any], group: str) -> str:
    """Hover box for one span; every piece of trace text is HTML-escaped (names are untrusted)."""
    name = str(span["name"])
    gpu = span["kind"] == "gpu"
    short = short_name(name) if gpu else name
    head = f"<b>{_wrap(short[:MAX_HOVER_NAME])}</b>"
    lines = [head]
    if gpu and short != name:
        clipped = name if len(name) <= MAX_HOVER_NAME else name[: MAX_HOVER_NAME - 1] + "…"
        lines.append(_wrap(clipped))
    lines.append(
        f"{html.escape(group, quote=False)} · {html.escape(str(span['lane']), quote=False)}"
    )
    lines.append(
        f"duration {_fmt_us(float(span['dur_us']))} · start {_fmt_us(float(span['start_us']))}"
    )
    step = span.get("step")
    if isinstance(step, (int, np.integer)) and step >= 0:
        lines.append(f"profiler step {int(step)}")
    args = _arg_text(span.get("args")) if gpu else ""
    if args:
        lines.append(args)
    return "<br>".join(lines)


def bar_text(span: dict[str, Any]) -> str:
    name = str(span["name"])
    label = short_name(name) if span["kind"] == "gpu" else name
    return html.escape(label, quote=False)


def category_arrays(spans: pd.DataFrame, rows_of_span: Sequence[str]) -> dict[str, CategoryArrays]:
    """Spans grouped into per-legend-group arrays, in a stable, readable legend order."""
    if spans.empty:
        return {}
    groups = legend_group(spans).to_numpy()
    cols = ["name", "kind", "lane", "start_us", "dur_us", "step", "args"]
    records = spans.reindex(columns=cols).to_dict("records")
    rows = np.asarray(rows_of_span, dtype=object)
    out: dict[str, CategoryArrays] = {}
    for group in _group_order(groups):
        idx = np.flatnonzero(groups == group)
        recs = [records[i] for i in idx]
        out[group] = CategoryArrays(
            name=group,
            base=spans["start_us"].to_numpy(dtype=float)[idx],
            dur=spans["dur_us"].to_numpy(dtype=float)[idx],
            row=list(rows[idx]),
            hover=[hover_text(r, group) for r in recs],
            text=[bar_text(r) for r in recs],
            index=idx,
        )
    return out


def _group_order(groups: np.ndarray) -> list[str]:
    known = [g for g in COLOURS if g in set(groups)]
    return known + sorted(set(groups) - set(known))


def colour(group: str, i: int = 0) -> str:
    return COLOURS.get(group, _FALLBACK[i % len(_FALLBACK)])


def link_segments(spans: pd.DataFrame, rows_of_span: Sequence[str]) -> tuple[list, list]:
    """x and y of launch → GPU-work segments, separated by None (one Scatter trace draws all)."""
    if spans.empty or "link" not in spans:
        return [], []
    link = spans["link"].to_numpy(dtype=np.int64)
    gpu = (spans["kind"] == "gpu").to_numpy() & (link >= 0)
    if not gpu.any():
        return [], []
    starts = spans["start_us"].to_numpy(dtype=float)
    xs: list[float | None] = []
    ys: list[str | None] = []
    for k in np.flatnonzero(gpu):
        launch = link[k]
        if not 0 <= launch < len(spans):
            continue
        xs += [float(starts[launch]), float(starts[k]), None]
        ys += [rows_of_span[launch], rows_of_span[k], None]
    return xs, ys


def boundaries(spans: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """ProfilerStep spans and CPU `attn_fwd` spans (the regions the chart marks)."""
    cpu = spans[spans["kind"] == "cpu"]
    name = cpu["name"].astype(str)
    steps = cpu[name.str.startswith(_STEP_PREFIX)].sort_values("start_us")
    forwards = cpu[name == FORWARD].sort_values("start_us")
    return steps.head(MAX_MARKERS), forwards.head(MAX_MARKERS)


def build_gantt(
    spans: pd.DataFrame,
    lanes: Sequence[str] | None = None,
    *,
    title: str | None = None,
    links: bool = True,
    marks: bool = True,
) -> go.Figure:
    """A Gantt chart of a spans table (profiling.trace): one bar per span.

    Rows are lane × depth (CPU threads stacked by nesting depth, then GPU streams), bars are
    coloured by legend group, hover shows name, duration and kernel launch args. ProfilerStep
    starts are dashed lines and `attn_fwd` regions are shaded; launch → kernel links are a
    legend-toggleable line trace, off by default. Zoom and pan come from plotly's modebar.
    """
    fig = go.Figure()
    if spans is None or spans.empty:
        fig.update_layout(
            height=MIN_HEIGHT,
            annotations=[
                dict(text="the trace holds no spans", showarrow=False, x=0.5, y=0.5,
                     xref="paper", yref="paper")
            ],
        )  # fmt: skip
        return fig
    rows_of_span, rows = span_rows(spans, lanes)
    for i, arrays in enumerate(category_arrays(spans, rows_of_span).values()):
        fig.add_trace(
            go.Bar(
                orientation="h",
                base=arrays.base,
                x=arrays.dur,
                y=arrays.row,
                name=arrays.name,
                legendgroup=arrays.name,
                marker=dict(color=colour(arrays.name, i), line=dict(width=0)),
                hovertext=arrays.hover,
                hovertemplate="%{hovertext}<extra></extra>",
                text=arrays.text,
                textposition="inside",
                insidetextanchor="start",
                textfont=dict(size=10),
                cliponaxis=True,
            )
        )
    if links:
        xs, ys = link_segments(spans, rows_of_span)
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    name=LINKS_NAME,
                    line=dict(color="rgba(60,60,60,0.55)", width=1),
                    hoverinfo="skip",
                    visible="legendonly",
                )
            )
    if marks:
        _add_marks(fig, spans)
    height = max(MIN_HEIGHT, BASE_HEIGHT + ROW_HEIGHT * len(rows))
    fig.update_layout(
        title=dict(text=html.escape(title, quote=False), x=0, font=dict(size=14))
        if title
        else None,
        barmode="overlay",
        bargap=0.25,
        height=height,
        margin=dict(l=10, r=10, t=60 if title else 40, b=50),
        uniformtext=dict(minsize=9, mode="hide"),
        hoverlabel=dict(align="left", font=dict(size=11, family="monospace")),
        legend=dict(title=dict(text="category"), traceorder="normal", itemclick="toggle"),
        plot_bgcolor="white",
        dragmode="zoom",
    )
    fig.update_yaxes(
        type="category",
        categoryorder="array",
        categoryarray=rows,
        autorange="reversed",
        fixedrange=True,  # zoom and pan act on time only
        automargin=True,
        ticklabelstandoff=8,
        tickfont=dict(size=11),
        gridcolor="#eef0f3",
    )
    fig.update_xaxes(
        title=dict(text=X_TITLE),
        zeroline=False,
        gridcolor="#eef0f3",
        showspikes=True,
        spikemode="across",
        spikethickness=1,
    )
    return fig


def _add_marks(fig: go.Figure, spans: pd.DataFrame) -> None:
    """Shade each attn_fwd, draw a dashed line at each ProfilerStep start (labelled on top)."""
    steps, forwards = boundaries(spans)
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for start, end in zip(forwards["start_us"], forwards["end_us"], strict=True):
        shapes.append(
            dict(type="rect", xref="x", yref="paper", x0=start, x1=end, y0=0, y1=1,
                 fillcolor="rgba(214,51,108,0.07)", line=dict(width=0), layer="below")
        )  # fmt: skip
    for name, start in zip(steps["name"], steps["start_us"], strict=True):
        shapes.append(
            dict(type="line", xref="x", yref="paper", x0=start, x1=start, y0=0, y1=1,
                 line=dict(color="rgba(80,80,80,0.6)", width=1, dash="dash"))
        )  # fmt: skip
        notes.append(
            dict(x=start, y=1, xref="x", yref="paper", yanchor="bottom", xanchor="left",
                 text=html.escape(str(name).replace(_STEP_PREFIX, "step "), quote=False),
                 showarrow=False, font=dict(size=10, color="#555"))
        )  # fmt: skip
    if not steps.empty:
        end = float(steps["end_us"].max())
        shapes.append(
            dict(type="line", xref="x", yref="paper", x0=end, x1=end, y0=0, y1=1,
                 line=dict(color="rgba(80,80,80,0.6)", width=1, dash="dash"))
        )  # fmt: skip
    fig.update_layout(shapes=shapes, annotations=notes)


def bar_count(fig: go.Figure) -> int:
    """Number of bars drawn (tests compare it with the number of spans).

    Counts `y` (row labels stay plain lists in JSON; numeric arrays may be base64 `bdata`).
    """
    return sum(len(t.y) for t in fig.data if t.type == "bar")
