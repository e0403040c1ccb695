"""The Gantt's level of detail: which spans get a bar each and which merge into density bars.

A trace of 10⁶ spans cannot be one bar each (the browser would receive hundreds of MB). Up to
DETAIL_LIMIT spans in the chosen window are drawn one bar per span; beyond that, spans
narrower than one time bin (the window split into LOD_BINS, about a pixel) are merged per row
and bin into density bars whose hover says how many spans they hold, and the longest spans stay
individual. Plain data, no plotly: profiling.gantt.spec draws what this picks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from profiling.gantt.bars import MAX_HOVER_NAME, format_us, wrap_hover
from profiling.kernels.names import short_name

DETAIL_LIMIT = 10_000  # spans drawn one bar each; above this, level of detail
LOD_BINS = 1_500  # time bins across the window (about a pixel each on a wide screen)
AGGREGATED = "aggregated spans"


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
        f"bin {format_us(start)} … {format_us(start + width)} · busy {format_us(busy)}<br>"
        f"most frequent: {wrap_hover(short_name(str(top))[:MAX_HOVER_NAME])} ×{int(n):,}<br>"
        "pick a narrower window for one bar per span"
        for count, row, start, width, busy, top, n in zip(
            agg["count"], agg["row"], agg["start_us"], agg["width_us"], agg["busy_us"],
            agg["top"], agg["top_count"], strict=True,
        )
    ]  # fmt: skip


def lod_note(detail: Detail) -> str:
    """One line saying what was drawn, aggregated and left out (empty for a full-detail chart)."""
    parts = []
    if not detail.aggregates.empty:
        merged = int(detail.aggregates["count"].sum())
        parts.append(
            f"Level of detail: {detail.in_window:,} spans in view; {len(detail.spans):,} drawn "
            f"one bar each (≥ {format_us(detail.threshold_us)}), {merged:,} aggregated into "
            f"{len(detail.aggregates):,} density bars (grey). Pick a narrower window for full "
            "detail."
        )
    if detail.outside:
        lo, hi = detail.window
        parts.append(
            f"Window {format_us(lo)} … {format_us(hi)}: {detail.outside:,} spans outside it are "
            "not drawn."
        )
    return " ".join(parts)
