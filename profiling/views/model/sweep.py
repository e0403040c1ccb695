"""A model Sweep as the Model tab shows it (issue 43): the step's time and its attention against
the sequence length per implementation (one log–log chart, as the Sweep tab's), the table of
points (a refused length or implementation says why: never dropped) and the zip of traces.

Pure (no gradio, no torch): `points` are profiling.jobs.model_sweep's, read duck-typed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.model.step import ATTENTION
from profiling.gantt.spec import FigureSpec
from profiling.views.model import table
from profiling.views.model.files import sweep_zip
from profiling.views.shared import escaped

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


@dataclass
class SweepPage:
    figure: FigureSpec
    table: pd.DataFrame
    zip_path: Path | None


def _series(points: Sequence[Any]) -> dict[str, list[tuple[int, float, float]]]:
    """implementation → (S, step ms, attention ms) where it ran, in the points' order."""
    found: dict[str, list[tuple[int, float, float]]] = {}
    for point in points:
        for item in point.result.runs if point.result is not None else ():
            if item.ok:
                step = item.split.step_us / 1e3
                attention = item.split.categories.get(ATTENTION, 0.0) / 1e3
                found.setdefault(item.id, []).append((point.seq_len, step, attention))
    return found


def sweep_figure(points: Sequence[Any], title: str = "") -> FigureSpec:
    """Step ms (solid) and its attention ms (dotted) vs S, per implementation, log–log."""
    data = []
    for index, (name, rows) in enumerate(_series(points).items()):
        color = COLORS[index % len(COLORS)]
        lengths = [row[0] for row in rows]
        data += [
            {"type": "scatter", "mode": "lines+markers", "name": f"{name}: step",
             "x": lengths, "y": [row[1] for row in rows], "line": {"color": color}},
            {"type": "scatter", "mode": "lines+markers", "name": f"{name}: attention",
             "x": lengths, "y": [row[2] for row in rows],
             "line": {"color": color, "dash": "dot"}, "marker": {"symbol": "circle-open"}},
        ]  # fmt: skip
    lengths = sorted({point.seq_len for point in points})
    layout = {
        "title": {"text": escaped(title or "The step and its attention vs S (log–log)")},
        "xaxis": {"title": {"text": "sequence length S"}, "type": "log", "tickvals": lengths,
                  "ticktext": [str(n) for n in lengths]},
        "yaxis": {"title": {"text": "ms per step (trace)"}, "type": "log"},
        "height": 420, "legend": {"title": {"text": "solid: the step · dotted: attention"}},
    }  # fmt: skip
    return FigureSpec(data=data, layout=layout)


def sweep_page(points: Sequence[Any]) -> SweepPage:
    """The chart, the table and the zip of a model Sweep."""
    shown = table.sweep(points)
    title = ""
    if points and points[0].workload.get("text"):
        title = f"{points[0].workload['text'].replace(f' S{points[0].seq_len}', '')} vs S"
    return SweepPage(sweep_figure(points, title), shown, sweep_zip(points, shown))
