"""The Gantt's rows: one per lane and nesting depth, and which rows fit in the chart.

Plain data (row labels and numbers per span), no plotly: profiling.gantt.spec lays the rows out,
and profiling.run.records labels a run's rows with the same `row_label`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

MAX_ROWS = 200  # rows drawn (lane × depth); an upload can hold 10⁵ threads or deep nesting


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
