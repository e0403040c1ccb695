"""Spans table → plotly Gantt chart: one row per lane and depth, one bar per span.

Built from the trace model (profiling.trace.model), never from key_averages, so it draws exactly
what the exported trace holds and works the same on a trace returned from a GPU run or one
a user uploads. It is a pure function of the spans table: no torch, no gradio.

The figure is plain dicts (FigureSpec): rows come from profiling.gantt.rows, bars from
gantt_bars, the level of detail from gantt_detail, and this module lays them out with the step
and `attn_fwd` marks. Plotly itself is imported only to build a Figure or read its default
template, so a run that only makes the spec (profiling.run.records) never loads it. Nothing is
dropped silently: the figure's note counts what was drawn, what was aggregated and what lies
outside the window, and `spans_drawn(fig)` adds individual bars and aggregated counts back up
to the spans in the window.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd

from profiling.gantt.bars import (
    CategoryArrays,
    category_arrays,
    colour,
    column_strings,
    link_segments,
)
from profiling.gantt.detail import (
    AGGREGATED,
    DETAIL_LIMIT,
    Detail,
    aggregate_hover,
    level_of_detail,
    lod_note,
)
from profiling.gantt.rows import MAX_ROWS, busiest_rows, row_index
from profiling.kernels.roles import table_roles
from profiling.trace.query import is_in, step_rows
from profiling.vocabulary import BACKWARD, FORWARD

if TYPE_CHECKING:
    import plotly.graph_objects as go

X_TITLE = "µs from first profiled step"
NO_STEP_X_TITLE = "µs from the trace's first span (no ProfilerStep)"
LINKS_NAME = "launch → kernel"
ROW_HEIGHT = 26  # px per row; the figure's height follows the number of rows
BASE_HEIGHT = 150  # px for axes, title and margins
MIN_HEIGHT = 380
MAX_MARKERS = 60  # step lines / phase regions drawn; more would only add clutter
# Each phase's shade behind the bars, and its label's colour (a train step has both)
PHASE_FILL = {FORWARD: "rgba(214,51,108,0.07)", BACKWARD: "rgba(31,119,180,0.09)"}
PHASE_TEXT = {FORWARD: "#a3284f", BACKWARD: "#1f5f8f"}
_STEP_PREFIX = "ProfilerStep#"


def gantt_x_title(spans: pd.DataFrame, steps: np.ndarray | None = None) -> str:
    """Time zero is the first ProfilerStep when the trace has one, else its first span."""
    steps = step_rows(spans) if steps is None else steps
    return x_title(bool(len(steps)))


def x_title(has_steps: bool) -> str:
    return X_TITLE if has_steps else NO_STEP_X_TITLE


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
        import plotly.graph_objects as go  # here, not at the top: a run's spec needs no plotly

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
    import plotly.io as pio  # here, not at the top: only serialising needs plotly

    name = pio.templates.default
    if isinstance(name, str):
        return _template_json(name)
    return orjson.Fragment(orjson.dumps(name.to_plotly_json() if name else {}))


@lru_cache(maxsize=8)
def _template_json(name: str) -> orjson.Fragment:
    import plotly.io as pio

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
    """A Gantt chart of a spans table (profiling.trace.model): one bar per span (or density bars).

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
        return _empty_spec()
    row_of_span, rows = row_index(spans, lanes)
    shown, row_of_span, rows, left_out = busiest_rows(spans, row_of_span, rows, max_rows)
    detail = level_of_detail(shown, np.asarray(rows, dtype=object)[row_of_span], window, limit)
    steps = step_rows(spans)
    view = detail.window if window is not None else None
    shapes, annotations = _marks(spans, steps, view) if marks else ([], [])
    note = " ".join(n for n in (left_out.note(), lod_note(detail)) if n)
    layout = figure_layout(rows, shapes, annotations, note, title, gantt_x_title(spans, steps),
                           view)  # fmt: skip
    roles = table_roles(spans)
    shown_roles = roles[detail.spans.index.to_numpy()] if roles is not None else None
    return FigureSpec(data=_traces(detail, links, shown_roles), layout=layout)


def _empty_spec() -> FigureSpec:
    """A chart that says the trace holds no spans (instead of empty axes)."""
    layout = dict(
        height=MIN_HEIGHT,
        annotations=[
            dict(text="the trace holds no spans", showarrow=False, x=0.5, y=0.5,
                 xref="paper", yref="paper")
        ],
    )  # fmt: skip
    return FigureSpec(data=[], layout=layout)


def _traces(detail: Detail, links: bool, roles: np.ndarray | None) -> list[dict[str, Any]]:
    """The bars of each legend group, the density bars, then the launch → kernel links."""
    groups = category_arrays(detail.spans, detail.rows, roles).values()
    traces = [bar_trace(arrays, i) for i, arrays in enumerate(groups)]
    if not detail.aggregates.empty:
        traces.append(aggregate_trace(detail.aggregates))
    if links:
        xs, ys = link_segments(detail.spans, detail.rows)
        if xs:
            traces.append(links_trace(xs, ys))
    return traces


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


def aggregate_trace(agg: pd.DataFrame) -> dict[str, Any]:
    """The density bars (gantt_detail), greyer the busier their bin; each holds its count."""
    density = np.clip(agg["busy_us"].to_numpy() / agg["width_us"].to_numpy(), 0, 1)
    return dict(
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
    )  # fmt: skip


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

    phases = np.flatnonzero(is_in(spans["kind"], "cpu") & is_in(spans["name"], *PHASE_FILL))
    return first(steps), first(phases)


def _marks(
    spans: pd.DataFrame, steps: np.ndarray, window: tuple[float, float] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shade each attn_fwd and attn_bwd, draw a dashed line at each ProfilerStep start
    (labelled on top)."""
    steps, phases = _boundary_rows(spans, steps, window)
    start = spans["start_us"].to_numpy(dtype=float)
    end = spans["end_us"].to_numpy(dtype=float)
    names = column_strings(spans["name"])
    return mark_dicts(
        [(start[i], end[i], names[i]) for i in phases.tolist()],
        [(start[i], end[i], names[i]) for i in steps.tolist()],
    )


def mark_dicts(
    phases: list[tuple[float, float, str]], steps: list[tuple[float, float, str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shapes and labels for the phases (start, end, name: attn_fwd or attn_bwd, each its own
    shade, labelled at the bottom when a trace has both) and the steps in view."""
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    both = len({name for _, _, name in phases}) > 1
    for x0, x1, name in phases:
        shapes.append(
            dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1,
                 fillcolor=PHASE_FILL[name], line=dict(width=0), layer="below")
        )  # fmt: skip
        if both:
            notes.append(
                dict(x=x0, y=0, xref="x", yref="paper", yanchor="bottom", xanchor="left",
                     text=name, showarrow=False, font=dict(size=9, color=PHASE_TEXT[name]))
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
