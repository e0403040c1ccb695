"""The Gantt of a run's trace records (profiling.run.records): gantt.gantt_spec without a
window, where every span is one bar, built from the records without the spans table.

The same figure as gantt_spec's, through the same helpers (row labels, legend groups, hover
text, bar and link traces, marks, layout); tests/run/test_small_trace.py compares the JSON on every
fixture. A trace that would need the level of detail or the row limit is never read as records
(small_trace declines it), so this path draws one bar per span, always.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from profiling.gantt.bars import (
    MAX_LINKS,
    CategoryArrays,
    bar_label,
    group_order,
    hover_text,
    legend_group_of,
)
from profiling.gantt.rows import row_label
from profiling.gantt.spec import (
    MAX_MARKERS,
    PHASE_FILL,
    FigureSpec,
    bar_trace,
    figure_layout,
    links_trace,
    mark_dicts,
    x_title,
)
from profiling.kernels.roles import record_roles
from profiling.run.records import SmallTrace, Span, by_start, deepest_levels


def gantt(t: SmallTrace, title: str | None = None) -> FigureSpec:
    """gantt_spec(spans, lanes, title=title) for this trace: one bar per span (a trace that
    would need the level of detail or the row limit is not read as records at all)."""
    spans = t.spans
    deepest = deepest_levels(spans, len(t.lanes))
    first_row = [0] * len(t.lanes)
    rows: list[str] = []
    for code, lane in enumerate(t.lanes):
        if deepest[code] < 0:
            continue
        first_row[code] = len(rows)
        stacked = deepest[code] > 0
        rows += [row_label(lane, d, stacked) for d in range(deepest[code] + 1)]
    row_of = [rows[first_row[s.lane] + (s.depth if deepest[s.lane] > 0 else 0)] for s in spans]
    groups: dict[str, list[Span]] = {}
    roles = record_roles(spans)
    for s in spans:
        groups.setdefault(legend_group_of(s.category, s.name, roles[s.index]), []).append(s)
    traces = []
    for i, group in enumerate(group_order(list(groups))):
        members = groups[group]
        arrays = CategoryArrays(
            name=group,
            base=np.array([s.start for s in members], dtype=float),
            dur=np.array([s.dur for s in members], dtype=float),
            row=[row_of[s.index] for s in members],
            hover=[
                hover_text(s.name, s.gpu, group, t.lanes[s.lane], s.dur, s.start, s.step, s.args)
                for s in members
            ],
            text=[bar_label(s.name, s.gpu) for s in members],
        )
        traces.append(bar_trace(arrays, i))
    linked = [s for s in spans if s.gpu and s.link >= 0][:MAX_LINKS]
    if linked:
        xs: list[Any] = []
        ys: list[Any] = []
        for s in linked:
            xs += [spans[s.link].start, s.start, None]
            ys += [row_of[s.link], row_of[s.index], None]
        traces.append(links_trace(xs, ys))
    steps = [s for s in spans if s.own_step >= 0]
    phases = [s for s in spans if not s.gpu and s.name in PHASE_FILL]
    shapes, annotations = mark_dicts(
        [(s.start, s.end, s.name) for s in by_start(phases)[:MAX_MARKERS]],
        [(s.start, s.end, s.name) for s in by_start(steps)[:MAX_MARKERS]],
    )
    layout = figure_layout(rows, shapes, annotations, "", title, x_title(bool(steps)))
    return FigureSpec(data=traces, layout=layout)
