"""Spans table → plotly Gantt chart: one row per lane and depth, one bar per span.

Built from the trace model (profiling.trace), never from key_averages, so it draws exactly
what the exported trace holds and works the same on a trace returned from a GPU run or one
a user uploads. It is a pure function of the spans table: no torch, no gradio.

Level of detail: a trace of 10⁶ spans cannot be one bar each (the browser would receive
hundreds of MB). Up to DETAIL_LIMIT spans in the chosen window are drawn one bar per span;
beyond that, spans narrower than one time bin (the window split into LOD_BINS, about a pixel)
are merged per row and bin into density bars whose hover says how many spans they hold, and
the longest spans stay individual. Nothing is dropped silently: the figure's note counts what
was drawn, what was aggregated and what lies outside the window, and `spans_drawn(fig)` adds
individual bars and aggregated counts back up to the spans in the window.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from profiling.kernels import classify, short_name
from profiling.summary import FORWARD
from profiling.trace_events import span_args
from profiling.trace_query import is_in, per_value, step_rows

X_TITLE = "µs from first profiled step"
NO_STEP_X_TITLE = "µs from the trace's first span (no ProfilerStep)"
LINKS_NAME = "launch → kernel"
ROW_HEIGHT = 26  # px per row; the figure's height follows the number of rows
BASE_HEIGHT = 150  # px for axes, title and margins
MIN_HEIGHT = 380
MAX_MARKERS = 60  # step lines / attn_fwd regions drawn; more would only add clutter
MAX_HOVER_NAME = 240  # characters of a kernel's full name in the hover box
HOVER_WRAP = 100  # characters per hover line
_STEP_PREFIX = "ProfilerStep#"
MAX_ROWS = 200  # rows drawn (lane × depth); an upload can hold 10⁵ threads or deep nesting
DETAIL_LIMIT = 10_000  # spans drawn one bar each; above this, level of detail
LOD_BINS = 1_500  # time bins across the window (about a pixel each on a wide screen)
MAX_LINKS = 3_000  # launch → kernel segments drawn (only between individually drawn spans)
AGGREGATED = "aggregated spans"

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
    return pd.Series(_legend_groups(spans), index=spans.index)


def _strings(column: pd.Series) -> np.ndarray:
    """A column as an object array of str (missing reads "nan", as astype(str))."""
    return per_value(column, str, "nan")


def legend_group_of(category: str, name: str) -> str:
    """One span's legend group (what `_legend_groups` gives each row)."""
    return f"kernel · {classify(name)}" if category == "kernel" else category


def _legend_groups(spans: pd.DataFrame) -> np.ndarray:
    group = _strings(spans["category"])
    is_kernel = group == "kernel"
    if is_kernel.any():
        kind = per_value(spans["name"], lambda n: classify(str(n)), "")[is_kernel]
        group[is_kernel] = "kernel · " + kind
    return group


def row_label(lane: str, depth: int, stacked: bool) -> str:
    """`CPU · thread 418 (python3) · d2` for stacked lanes, the lane itself otherwise.

    Escaped: plotly renders tick labels as (a subset of) HTML and lane names come from the
    trace's thread names, which an uploaded trace sets to anything."""
    lane = html.escape(lane, quote=False)
    return f"{lane} · d{depth}" if stacked else lane


def span_rows(
    spans: pd.DataFrame, lanes: Sequence[str] | None = None
) -> tuple[np.ndarray, list[str]]:
    """Row label per span and the rows top to bottom: lanes in order, each split by depth.

    A lane whose spans nest (CPU threads) gets one row per depth; a flat lane (a GPU stream)
    keeps one row. Lanes listed in `lanes` but without spans get no row.
    """
    index, rows = row_index(spans, lanes)
    return np.asarray(rows, dtype=object)[index] if rows else np.zeros(0, dtype=object), rows


def row_index(spans: pd.DataFrame, lanes: Sequence[str] | None = None) -> tuple[np.ndarray, list]:
    """Row number per span (into the returned row labels), computed without a per-span loop."""
    if spans.empty:
        return np.zeros(0, dtype=np.int64), []
    lane = spans["lane"]
    if isinstance(lane.dtype, pd.CategoricalDtype) and not lane.isna().any():
        lane_codes = lane.array.codes.astype(np.int64)
        lane_names = [str(c) for c in lane.cat.categories]
    else:
        lane_codes, uniques = pd.factorize(lane.astype(str), sort=False)
        lane_names = [str(c) for c in uniques]
    depth = spans["depth"].to_numpy(dtype=np.int64)
    deepest = np.full(len(lane_names), -1, dtype=np.int64)
    np.maximum.at(deepest, lane_codes, depth)
    order = list(dict.fromkeys([str(x) for x in lanes] if lanes else []))
    listed = set(order)
    order += [x for x in lane_names if x not in listed]  # a set: uploads can hold 10⁵ lanes
    position = {name: i for i, name in enumerate(lane_names)}
    first_row = np.zeros(len(lane_names), dtype=np.int64)
    stacked = np.zeros(len(lane_names), dtype=bool)
    rows: list[str] = []
    for name in order:
        code = position.get(name)
        if code is None or deepest[code] < 0:
            continue
        first_row[code] = len(rows)
        stacked[code] = deepest[code] > 0
        rows += [row_label(name, d, bool(stacked[code])) for d in range(int(deepest[code]) + 1)]
    index = first_row[lane_codes] + np.where(stacked[lane_codes], depth, 0)
    return index, rows


@dataclass
class RowsLeftOut:
    """Rows past MAX_ROWS and the spans on them: said under the chart, never dropped silently."""

    rows: int = 0
    spans: int = 0
    total_rows: int = 0

    def note(self) -> str:
        if not self.rows:
            return ""
        return (
            f"Rows: the trace has {self.total_rows:,} rows (lanes × nesting depth); the "
            f"{self.total_rows - self.rows:,} busiest are drawn, and {self.spans:,} spans on "
            f"the other {self.rows:,} are not (the tables count them)."
        )


def busiest_rows(
    spans: pd.DataFrame, row_of_span: np.ndarray, rows: list[str], limit: int
) -> tuple[pd.DataFrame, np.ndarray, list[str], RowsLeftOut]:
    """At most `limit` rows, the ones with the most summed span time, in display order.

    A nested span lies inside its parent, so a row never holds more time than the row above
    it in the same lane: the cut keeps each lane's top rows and its GPU streams' work, and
    drops the long tail an upload with thousands of threads or deep recursion would add.
    """
    if len(rows) <= limit:
        return spans, row_of_span, rows, RowsLeftOut()
    busy = np.bincount(row_of_span, weights=spans["dur_us"].to_numpy(float), minlength=len(rows))
    keep = np.zeros(len(rows), dtype=bool)
    keep[np.argsort(-busy, kind="stable")[:limit]] = True
    shown = keep[row_of_span]
    renumber = np.cumsum(keep) - 1
    left_out = RowsLeftOut(len(rows) - limit, int((~shown).sum()), len(rows))
    kept_rows = [r for r, k in zip(rows, keep, strict=True) if k]
    picked = np.flatnonzero(shown)
    return spans.iloc[picked], renumber[row_of_span[picked]], kept_rows, left_out


def gantt_x_title(spans: pd.DataFrame, steps: np.ndarray | None = None) -> str:
    """Time zero is the first ProfilerStep when the trace has one, else its first span."""
    steps = step_rows(spans) if steps is None else steps
    return x_title(bool(len(steps)))


def x_title(has_steps: bool) -> str:
    return X_TITLE if has_steps else NO_STEP_X_TITLE


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


def hover_text(
    name: str, gpu: bool, group: str, lane: str, dur: float, start: float, step: Any, args: Any
) -> str:
    lines = [_hover_head(name, gpu, group, lane)]
    lines.append(f"duration {_fmt_us(dur)} · start {_fmt_us(start)}")
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
    lines = [f"<b>{_wrap(short[:MAX_HOVER_NAME])}</b>"]
    if gpu and short != name:
        clipped = name if len(name) <= MAX_HOVER_NAME else name[: MAX_HOVER_NAME - 1] + "…"
        lines.append(_wrap(clipped))
    lines.append(f"{html.escape(group, quote=False)} · {html.escape(lane, quote=False)}")
    return "<br>".join(lines)


@lru_cache(maxsize=65536)
def bar_label(name: str, gpu: bool) -> str:
    return html.escape(short_name(name) if gpu else name, quote=False)


def category_arrays(spans: pd.DataFrame, rows_of_span: Sequence[str]) -> dict[str, CategoryArrays]:
    """Spans grouped into per-legend-group arrays, in a stable, readable legend order.

    Columns are read once as arrays and each bar's text built from them: pandas'
    to_dict("records") alone cost more than the rest of a run's figure.
    """
    if spans.empty:
        return {}
    n = len(spans)
    groups = _legend_groups(spans)
    name, lane = _strings(spans["name"]), _strings(spans["lane"])
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


@dataclass
class Detail:
    """What the chart draws: spans one bar each, density bars for the rest, and the counts."""

    spans: pd.DataFrame  # drawn individually
    rows: np.ndarray  # row label per drawn span
    aggregates: pd.DataFrame  # row, start_us, width_us, count, busy_us, top, top_count, kind
    window: tuple[float, float]
    in_window: int
    outside: int
    threshold_us: float  # spans shorter than this were aggregated (0: none were)


_NO_AGGREGATES = pd.DataFrame(
    columns=["row", "start_us", "width_us", "count", "busy_us", "top", "top_count", "kind"]
)  # shared, read-only: what Detail.aggregates is when nothing was merged


def level_of_detail(
    spans: pd.DataFrame,
    row_labels: np.ndarray,
    window: tuple[float, float] | None = None,
    limit: int = DETAIL_LIMIT,
    bins: int = LOD_BINS,
) -> Detail:
    """Pick what to draw: everything in the window when it is small, else the longest spans
    plus per-row density bars for those narrower than a time bin (or than the limit allows)."""
    start = spans["start_us"].to_numpy(dtype=float)
    end = spans["end_us"].to_numpy(dtype=float)
    lo, hi = (float(start.min()), float(end.max())) if window is None else window
    if hi <= lo:
        hi = lo + 1.0
    inside = (end >= lo) & (start <= hi)
    n_in = int(inside.sum())
    if n_in <= limit:
        if n_in == len(spans):  # everything drawn: no copy of the table
            return Detail(spans, row_labels, _NO_AGGREGATES, (lo, hi), n_in, 0, 0.0)
        keep = np.flatnonzero(inside)
        return Detail(spans.iloc[keep], row_labels[keep], _NO_AGGREGATES, (lo, hi), n_in,
                      len(spans) - n_in, 0.0)  # fmt: skip
    width = (hi - lo) / bins
    dur = spans["dur_us"].to_numpy(dtype=float)
    candidates = np.flatnonzero(inside)
    # the `limit` longest spans that are at least a bin wide are drawn individually
    wide = candidates[dur[candidates] >= width]
    if len(wide) > limit:
        wide = wide[np.argsort(-dur[wide], kind="stable")[:limit]]
    threshold = float(dur[wide].min()) if len(wide) else width
    individual = np.zeros(len(spans), dtype=bool)
    individual[wide] = True
    narrow = candidates[~individual[candidates]]
    agg = _density(spans, row_labels, narrow, lo, width, bins)
    keep = np.flatnonzero(individual)
    return Detail(spans.iloc[keep], row_labels[keep], agg, (lo, hi), n_in, len(spans) - n_in,
                  threshold)  # fmt: skip


def _density(
    spans: pd.DataFrame,
    row_labels: np.ndarray,
    narrow: np.ndarray,
    lo: float,
    width: float,
    bins: int,
) -> pd.DataFrame:
    """Per (row, time bin): how many spans, their summed duration, the most frequent name.

    Plain numpy over integer keys (bincount, one sort for the name counts): the pandas
    three-key groupby it replaces took ~0.8 s for 7·10⁵ spans.
    """  # fmt: skip
    start = spans["start_us"].to_numpy(dtype=float)[narrow]
    end = spans["end_us"].to_numpy(dtype=float)[narrow]
    dur = spans["dur_us"].to_numpy(dtype=float)[narrow]
    row_codes, row_names = pd.factorize(row_labels[narrow])
    mid = np.clip((start + end) / 2, lo, lo + width * bins)
    key = row_codes.astype(np.int64) * bins + np.minimum(((mid - lo) / width).astype(np.int64),
                                                         bins - 1)  # fmt: skip
    keys, inverse = np.unique(key, return_inverse=True)
    count = np.bincount(inverse, minlength=len(keys))
    busy = np.bincount(inverse, weights=dur, minlength=len(keys))
    names = spans["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        name_codes, name_values = names.cat.codes.to_numpy()[narrow], names.cat.categories
    else:
        name_codes, name_values = pd.factorize(names.to_numpy()[narrow])
    pair = inverse.astype(np.int64) * (len(name_values) + 1) + name_codes
    pairs, pair_count = np.unique(pair, return_counts=True)
    pair_key = pairs // (len(name_values) + 1)
    best = np.lexsort((-pair_count, pair_key))  # per key, the most frequent name first
    first = best[np.r_[True, pair_key[best][1:] != pair_key[best][:-1]]]
    kinds = spans["kind"].astype(str).to_numpy()[narrow]
    kind_of_key = np.empty(len(keys), dtype=object)
    kind_of_key[inverse] = kinds
    return pd.DataFrame(
        {
            "row": np.asarray(row_names, dtype=object)[keys // bins],
            "bin": keys % bins,
            "count": count,
            "busy_us": busy,
            "kind": kind_of_key,
            "top": np.asarray(name_values, dtype=object)[pairs[first] % (len(name_values) + 1)],
            "top_count": pair_count[first],
            "start_us": lo + (keys % bins) * width,
            "width_us": width,
        }
    )


def aggregate_hover(agg: pd.DataFrame) -> list[str]:
    return [
        f"<b>{count:,} spans aggregated</b> (each shorter than one bin)<br>"
        f"{row}<br>"  # row labels are escaped already (row_label)
        f"bin {_fmt_us(start)} … {_fmt_us(start + width)} · busy {_fmt_us(busy)}<br>"
        f"most frequent: {_wrap(short_name(str(top))[:MAX_HOVER_NAME])} ×{int(n):,}<br>"
        "pick a narrower window for one bar per span"
        for count, row, start, width, busy, top, n in zip(
            agg["count"], agg["row"], agg["start_us"], agg["width_us"], agg["busy_us"],
            agg["top"], agg["top_count"], strict=True,
        )
    ]  # fmt: skip


def _boundary_rows(
    spans: pd.DataFrame, steps: np.ndarray, window: tuple[float, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the first MAX_MARKERS ProfilerStep and `attn_fwd` CPU spans in view (the
    window, else the whole trace), by start: a window late in a long trace gets its own."""
    start = spans["start_us"].to_numpy(dtype=float)
    end = spans["end_us"].to_numpy(dtype=float)

    def first(rows: np.ndarray) -> np.ndarray:
        if window is not None:
            rows = rows[(end[rows] >= window[0]) & (start[rows] <= window[1])]
        return rows[np.argsort(start[rows], kind="stable")][:MAX_MARKERS]

    forwards = np.flatnonzero(is_in(spans["kind"], "cpu") & is_in(spans["name"], FORWARD))
    return first(steps), first(forwards)


@dataclass
class FigureSpec:
    """A plotly figure as the plain dicts it is made of.

    `figure()` gives the plotly Figure; `to_json()` writes the same JSON plotly would send
    (with plotly's default template) through orjson, without building the Figure. gr.Plot
    only calls `.to_json()` on what it is given, and for a run's chart plotly's object model
    (building the Figure, then deep-copying it to serialise) cost ~4 ms of a ~25 ms click.
    """

    data: list[dict[str, Any]]
    layout: dict[str, Any]

    def figure(self) -> go.Figure:
        # a copy: plotly rearranges the dicts it is given (it pops each trace's "type")
        data, layout = copy.deepcopy((self.data, self.layout))
        return go.Figure(data=data, layout=layout, _validate=False)

    def to_json(self) -> str:
        layout = self.layout if "template" in self.layout else {
            **self.layout, "template": _default_template()
        }  # fmt: skip
        return orjson.dumps(
            {"data": self.data, "layout": layout}, option=orjson.OPT_SERIALIZE_NUMPY
        ).decode()


def _default_template() -> orjson.Fragment:
    """Plotly's current default template as JSON (computed once per template name)."""
    name = pio.templates.default
    if isinstance(name, str):
        return _template_json(name)
    return orjson.Fragment(orjson.dumps(name.to_plotly_json() if name else {}))


@lru_cache(maxsize=8)
def _template_json(name: str) -> orjson.Fragment:
    return orjson.Fragment(orjson.dumps(pio.templates[name].to_plotly_json()))


def build_gantt(
    spans: pd.DataFrame, lanes: Sequence[str] | None = None, **options: Any
) -> go.Figure:
    """`gantt_spec` (same options) as a plotly Figure."""
    return gantt_spec(spans, lanes, **options).figure()


def gantt_spec(
    spans: pd.DataFrame,
    lanes: Sequence[str] | None = None,
    *,
    title: str | None = None,
    links: bool = True,
    marks: bool = True,
    window: tuple[float, float] | None = None,
    limit: int = DETAIL_LIMIT,
    max_rows: int = MAX_ROWS,
) -> FigureSpec:
    """A Gantt chart of a spans table (profiling.trace): one bar per span (or density bars).

    Rows are lane × depth (CPU threads stacked by nesting depth, then GPU streams), bars are
    coloured by legend group, hover shows name, duration and kernel launch args. ProfilerStep
    starts are dashed lines and `attn_fwd` regions are shaded; launch → kernel links are a
    legend-toggleable line trace, off by default. Zoom and pan come from plotly's modebar.

    The figure is assembled as plain dicts and built once with plotly's validation off
    (`_validate=False`, what plotly.express does internally): validating every property
    cost ~40 ms for 364 spans, building the same dicts ~2 ms. The dicts only use properties
    this module's tests render through plotly's own JSON.
    """
    if spans is None or spans.empty:
        layout = dict(
            height=MIN_HEIGHT,
            annotations=[
                dict(text="the trace holds no spans", showarrow=False, x=0.5, y=0.5,
                     xref="paper", yref="paper")
            ],
        )  # fmt: skip
        return FigureSpec(data=[], layout=layout)
    all_spans = spans
    row_of_span, rows = row_index(spans, lanes)
    spans, row_of_span, rows, left_out = busiest_rows(spans, row_of_span, rows, max_rows)
    rows_of_span = np.asarray(rows, dtype=object)[row_of_span]
    detail = level_of_detail(spans, rows_of_span, window, limit)
    drawn, rows_of_span = detail.spans, detail.rows
    groups = category_arrays(drawn, rows_of_span).values()
    traces = [bar_trace(arrays, i) for i, arrays in enumerate(groups)]
    if not detail.aggregates.empty:
        agg = detail.aggregates
        density = np.clip(agg["busy_us"].to_numpy() / agg["width_us"].to_numpy(), 0, 1)
        traces.append(
            dict(
                type="bar",
                orientation="h",
                base=agg["start_us"].to_numpy(),
                x=agg["width_us"].to_numpy(),
                y=agg["row"].tolist(),
                name=f"{AGGREGATED} ({int(agg['count'].sum()):,})",
                legendgroup=AGGREGATED,
                marker=dict(color=[f"rgba(90,90,110,{0.25 + 0.75 * d:.2f})" for d in density],
                            line=dict(width=0)),
                customdata=agg["count"].to_numpy(),
                hovertext=aggregate_hover(agg),
                hovertemplate="%{hovertext}<extra></extra>",
                cliponaxis=True,
            )
        )  # fmt: skip
    if links:
        xs, ys = link_segments(drawn, rows_of_span)
        if xs:
            traces.append(links_trace(xs, ys))
    steps = step_rows(all_spans)
    view = detail.window if window is not None else None
    shapes, annotations = _marks(all_spans, steps, view) if marks else ([], [])
    note = " ".join(n for n in (left_out.note(), lod_note(detail)) if n)
    layout = figure_layout(rows, shapes, annotations, note, title, gantt_x_title(all_spans, steps),
                           view)  # fmt: skip
    return FigureSpec(data=traces, layout=layout)


def bar_trace(arrays: CategoryArrays, i: int) -> dict[str, Any]:
    """One legend group's bars (the `i`-th group: its fallback colour)."""
    return dict(
        type="bar",
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


def links_trace(xs: list, ys: list) -> dict[str, Any]:
    """Launch → GPU-work segments as one line trace, hidden until its legend entry is clicked."""
    return dict(
        type="scatter",
        x=xs,
        y=ys,
        mode="lines",
        name=LINKS_NAME,
        line=dict(color="rgba(60,60,60,0.55)", width=1),
        hoverinfo="skip",
        visible="legendonly",
    )


def figure_layout(
    rows: list[str],
    shapes: list[dict[str, Any]],
    annotations: list[dict[str, Any]],
    note: str,
    title: str | None,
    x_title: str,
    view_range: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The chart's layout: a row per lane × depth, the marks, the note under the chart."""
    if note:
        annotations.append(
            dict(text=html.escape(note, quote=False), x=0, y=-0.12, xref="paper", yref="paper",
                 xanchor="left", yanchor="top", showarrow=False,
                 font=dict(size=11, color="#7a4b00"), align="left")
        )  # fmt: skip
    layout: dict[str, Any] = dict(
        barmode="overlay",
        bargap=0.25,
        height=max(MIN_HEIGHT, BASE_HEIGHT + ROW_HEIGHT * len(rows)),
        margin=dict(l=10, r=10, t=60 if title else 40, b=80 if note else 50),
        uniformtext=dict(minsize=9, mode="hide"),
        hoverlabel=dict(align="left", font=dict(size=11, family="monospace")),
        legend=dict(title=dict(text="category"), traceorder="normal", itemclick="toggle"),
        plot_bgcolor="white",
        dragmode="zoom",
        shapes=shapes,
        annotations=annotations,
        yaxis=dict(
            type="category",
            categoryorder="array",
            categoryarray=rows,
            autorange="reversed",
            fixedrange=True,  # zoom and pan act on time only
            automargin=True,
            ticklabelstandoff=8,
            tickfont=dict(size=11),
            gridcolor="#eef0f3",
        ),
        xaxis=dict(
            title=dict(text=x_title),
            zeroline=False,
            gridcolor="#eef0f3",
            showspikes=True,
            spikemode="across",
            spikethickness=1,
        ),
    )
    if title:
        layout["title"] = dict(text=html.escape(title, quote=False), x=0, font=dict(size=14))
    if view_range is not None:
        layout["xaxis"]["range"] = list(view_range)
    return layout


def _marks(
    spans: pd.DataFrame, steps: np.ndarray, window: tuple[float, float] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shade each attn_fwd, draw a dashed line at each ProfilerStep start (labelled on top)."""
    steps, forwards = _boundary_rows(spans, steps, window)
    start = spans["start_us"].to_numpy(dtype=float)
    end = spans["end_us"].to_numpy(dtype=float)
    names = _strings(spans["name"])
    return mark_dicts(
        [(start[i], end[i]) for i in forwards.tolist()],
        [(start[i], end[i], names[i]) for i in steps.tolist()],
    )


def mark_dicts(
    forwards: list[tuple[float, float]], steps: list[tuple[float, float, str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shapes and labels for the forwards (start, end) and steps (start, end, name) in view."""
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for x0, x1 in forwards:
        shapes.append(
            dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1,
                 fillcolor="rgba(214,51,108,0.07)", line=dict(width=0), layer="below")
        )  # fmt: skip
    for x, _, name in steps:
        shapes.append(
            dict(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1,
                 line=dict(color="rgba(80,80,80,0.6)", width=1, dash="dash"))
        )  # fmt: skip
        notes.append(
            dict(x=x, y=1, xref="x", yref="paper", yanchor="bottom", xanchor="left",
                 text=html.escape(name.replace(_STEP_PREFIX, "step "), quote=False),
                 showarrow=False, font=dict(size=10, color="#555"))
        )  # fmt: skip
    if steps:
        last = float(max(end for _, end, _ in steps))
        shapes.append(
            dict(type="line", xref="x", yref="paper", x0=last, x1=last, y0=0, y1=1,
                 line=dict(color="rgba(80,80,80,0.6)", width=1, dash="dash"))
        )  # fmt: skip
    return shapes, notes


def lod_note(detail: Detail) -> str:
    """One line saying what was drawn, aggregated and left out (empty for a full-detail chart)."""
    parts = []
    if not detail.aggregates.empty:
        merged = int(detail.aggregates["count"].sum())
        parts.append(
            f"Level of detail: {detail.in_window:,} spans in view; {len(detail.spans):,} drawn "
            f"one bar each (≥ {_fmt_us(detail.threshold_us)}), {merged:,} aggregated into "
            f"{len(detail.aggregates):,} density bars (grey). Pick a narrower window for full "
            "detail."
        )
    if detail.outside:
        lo, hi = detail.window
        parts.append(
            f"Window {_fmt_us(lo)} … {_fmt_us(hi)}: {detail.outside:,} spans outside it are "
            "not drawn."
        )
    return " ".join(parts)


def spans_drawn(fig: go.Figure | FigureSpec) -> int:
    """Spans the figure accounts for: one per individual bar plus each density bar's count."""
    fig = fig.figure() if isinstance(fig, FigureSpec) else fig
    total = 0
    for t in fig.data:
        if t.type != "bar":
            continue
        if t.legendgroup == AGGREGATED:
            total += int(np.asarray(t.customdata).sum())
        else:
            total += len(t.y)
    return total


def bar_count(fig: go.Figure | FigureSpec) -> int:
    """Number of bars drawn (tests compare it with the number of spans).

    Counts `y` (row labels stay plain lists in JSON; numeric arrays may be base64 `bdata`).
    """
    fig = fig.figure() if isinstance(fig, FigureSpec) else fig
    return sum(len(t.y) for t in fig.data if t.type == "bar")
