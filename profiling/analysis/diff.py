"""Diff: what changed between two traces, per kernel name and per operator.

Perfetto cannot diff two traces; this reads the change off directly: "in-place removes one
Memcpy per forward", "math adds 18 kernels". Both sides are counted over the same kind of
window (GPU work launched inside the attn_fwd spans, else the active ProfilerSteps, else the
whole trace) and, by default, divided by that side's number of forwards, so two runs with
different step counts still compare per forward.

Timings move from one forward to the next even when nothing changed, so each row also carries
its spread: how far that row's time varies between the windows of A plus between those of B.
A change within it is marked `noise`; a change in the number of calls is marked `count` and
leads the table, as the change in what the two runs do (not how fast it happened to go).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from profiling.analysis.analyze import operator_sums
from profiling.analysis.summary import (
    forward_spans,
    gpu_work,
    launched_rows,
    launched_within,
    starts_inside,
    work_rows,
)
from profiling.kernels.names import classify, short_name
from profiling.text_tables import counted
from profiling.trace.model import Trace, load
from profiling.trace.query import operator_rows, own_calls
from profiling.vocabulary import ALL_THREADS, BACKWARD, FORWARD, STEP

TraceLike = Trace | str | Path | bytes

KERNEL_DIFF_COLUMNS = [
    "kernel", "category", "where", "count_a", "count_b", "delta_count", "total_us_a",
    "total_us_b", "delta_us", "name", "spread_us", "change",
]  # fmt: skip
OPERATOR_DIFF_COLUMNS = [
    "operator", "where", "count_a", "count_b", "delta_count", "total_us_a", "total_us_b",
    "delta_us", "self_us_a", "self_us_b", "delta_self_us", "spread_us", "spread_self_us", "change",
]  # fmt: skip
# What a row's change is, in the order the tables list them: calls added, removed or called a
# different number of times; a time beyond the spread; a time within it; nothing at all.
CHANGES = ("count", "time", "noise", "none")


def diff(
    trace_a: TraceLike,
    trace_b: TraceLike,
    label_a: str = "A",
    label_b: str = "B",
    per_forward: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kernel delta table, operator delta table): structural changes first, then changes in
    time beyond the spread, then those within it (see CHANGES), each largest first.

    Deltas are B − A. Columns end in `_a` / `_b`; `labelled()` renames them for display, and
    both tables carry `attrs["labels"]`, `attrs["divisors"]`, `attrs["scopes"]`,
    `attrs["windows"]` and `attrs["sum_spread"]` (the spread of the column sums).
    """
    a, b = as_trace(trace_a), as_trace(trace_b)
    wa, sa, ua = windows(a)
    wb, sb, ub = windows(b)
    na = (len(wa) or 1) if per_forward else 1
    nb = (len(wb) or 1) if per_forward else 1
    sides = ((a, wa, per_forward), (b, wb, per_forward))
    kernels = _delta(
        _kernel_totals(a, wa, na), _kernel_totals(b, wb, nb), ["count", "total_us"], "name"
    )
    kernels["kernel"] = kernels["name"].map(short_name)
    kernels["category"] = kernels["name"].map(classify)
    kernels = _with_spread(kernels, "name", sides, _kernel_rows, ["total_us"])
    kernels = _sorted(kernels)[KERNEL_DIFF_COLUMNS]
    operators = _delta(
        _operator_totals(a, wa, na),
        _operator_totals(b, wb, nb),
        ["count", "total_us", "self_us"],
        "operator",
    )
    operators = _with_spread(operators, "operator", sides, _operator_rows, ["total_us", "self_us"])
    operators = _sorted(operators)[OPERATOR_DIFF_COLUMNS]
    for table in (kernels, operators):
        table.attrs.update(
            labels=(label_a, label_b),
            divisors=(na, nb),
            scopes=(sa, sb),
            windows=(len(wa), len(wb)),
            per_forward=per_forward,
            units=(ua, ub) if per_forward else ("in total", "in total"),
        )
    return kernels, operators


def as_trace(source: TraceLike) -> Trace:
    """A Trace as is; a path or bytes parsed (plain or gzip JSON)."""
    return source if isinstance(source, Trace) else load(source)


def windows(trace: Trace) -> tuple[pd.DataFrame, str, str]:
    """The windows one side is counted over (a training run's attn_step spans, else attn_fwd
    spans, else a backward run's attn_bwd, else ProfilerSteps, else none), what they are, and
    the unit a count per window is in."""
    for name, unit in ((STEP, "per step"), (FORWARD, "per forward"), (BACKWARD, "per backward")):
        found = forward_spans(trace, name)
        if not found.empty:
            return found, counted(len(found), f"{name} span"), unit
    steps = trace.steps()
    if not steps.empty:
        return steps, f"{counted(len(steps), 'ProfilerStep')} (no attn_fwd spans)", "per step"
    return steps, "the whole trace (no attn_fwd or ProfilerStep spans)", "in the whole trace"


def labelled(table: pd.DataFrame, label_a: str | None = None, label_b: str | None = None):
    """The same table with `_a` / `_b` columns named after the two runs, for display."""
    la, lb = table.attrs.get("labels", ("A", "B"))
    la, lb = label_a or la, label_b or lb
    base = {"count": "count", "total_us": "total µs", "self_us": "self µs"}
    names = {f"{k}_a": f"{v} {la}" for k, v in base.items()}
    names |= {f"{k}_b": f"{v} {lb}" for k, v in base.items()}
    names |= {
        "delta_count": f"Δ count ({lb} − {la})",
        "delta_us": f"Δ total µs ({lb} − {la})",
        "delta_self_us": f"Δ self µs ({lb} − {la})",
        "spread_us": "spread µs",
        "spread_self_us": "self spread µs",
    }
    out = table.rename(columns=names)
    out["where"] = out["where"].map({"both": "both", "a": f"only {la}", "b": f"only {lb}"})
    if "kernel" in table.columns:  # one kernel, two instantiations: said, not left to guess
        twins, side = template_twins(table), table["where"].to_numpy()
        out.loc[twins & (side == "a"), "where"] = f"only {la} ({lb} runs it with {OTHER_ARGS})"
        out.loc[twins & (side == "b"), "where"] = f"only {lb} ({la} runs it with {OTHER_ARGS})"
    return out


OTHER_ARGS = "other template arguments"


def template_twins(kernels: pd.DataFrame) -> np.ndarray:
    """Kernel rows on one side only whose short name a row on the other side only shares: the
    same kernel instantiated with other template arguments (`…cta_per_row_1<float, …>` in A,
    `…<c10::Half, …>` in B), which would otherwise read as one kernel dropped, another added."""
    one_sided = kernels["where"] != "both"
    sides = kernels.loc[one_sided].groupby("kernel", sort=False)["where"].nunique()
    return (one_sided & kernels["kernel"].isin(sides.index[sides > 1])).to_numpy()


def _kernel_totals(trace: Trace, win: pd.DataFrame, per: int) -> pd.DataFrame:
    work = gpu_work(trace) if win.empty else launched_within(trace, win)
    g = work.groupby("name", observed=True, sort=False)["dur_us"]
    return pd.DataFrame({"count": g.size() / per, "total_us": g.sum() / per})


def _operator_totals(trace: Trace, win: pd.DataFrame, per: int) -> pd.DataFrame:
    s = trace.spans
    rows = operator_rows(s)
    if not win.empty and len(rows):
        rows = rows[starts_inside(s, rows, s.index.get_indexer(win.index))]
    sums = operator_sums(s, rows)
    return pd.DataFrame(
        {"count": sums["calls"] / per, "total_us": sums["total_us"] / per,
         "self_us": sums["self_us"] / per}
    )  # fmt: skip


def _delta(a: pd.DataFrame, b: pd.DataFrame, measures: list[str], key: str) -> pd.DataFrame:
    """Outer join of two per-name tables: both sides, B − A, and where each name occurs."""
    table = a.join(b, how="outer", lsuffix="_a", rsuffix="_b")
    in_a = table.index.isin(a.index)
    in_b = table.index.isin(b.index)
    table = table.fillna(0.0)
    for m in measures:
        short = m.removesuffix("_us")
        name = "delta_count" if m == "count" else f"delta_{short}_us"
        name = "delta_us" if m == "total_us" else name
        table[name] = table[f"{m}_b"] - table[f"{m}_a"]
    table["where"] = np.select([in_a & in_b, in_a], ["both", "a"], "b")
    table.index.name = key
    return table.reset_index()


def _with_spread(
    table: pd.DataFrame,
    key: str,
    sides: tuple[tuple[Trace, pd.DataFrame, bool], ...],
    per_row: Callable[[Trace, pd.DataFrame], pd.DataFrame],
    measures: list[str],
) -> pd.DataFrame:
    """`table` with each measure's spread (A's plus B's; NaN where a side has fewer than two
    windows, so none can be read) and what each row's change is (CHANGES)."""
    spreads = [
        _window_spread(per_row(trace, win), len(win), measures, 1 if per else len(win))
        for trace, win, per in sides
    ]
    names = table[key].astype(str)
    sum_spread = {}
    for measure in measures:
        column = _spread_column(measure)
        if any(side is None for side in spreads):
            table[column], sum_spread[measure] = np.nan, np.nan
            continue
        per_name = [side[0][measure].reindex(names).fillna(0.0).to_numpy() for side in spreads]
        table[column] = per_name[0] + per_name[1]
        sum_spread[measure] = spreads[0][1][measure] + spreads[1][1][measure]
    deltas = {"total_us": "delta_us", "self_us": "delta_self_us"}
    moved = [table[deltas[m]].abs() for m in measures]
    within = np.logical_and.reduce(
        [delta <= table[_spread_column(m)] for delta, m in zip(moved, measures, strict=True)]
    )
    still = np.logical_and.reduce([delta < 1e-9 for delta in moved])
    counted = table["delta_count"].abs() > 1e-9
    table["change"] = np.select([counted, still, within], ["count", "none", "noise"], "time")
    table.attrs["sum_spread"] = sum_spread
    return table


def _spread_column(measure: str) -> str:
    return "spread_us" if measure == "total_us" else f"spread_{measure}"


def _window_spread(
    rows: pd.DataFrame, windows: int, measures: list[str], scale: int
) -> tuple[pd.DataFrame, dict[str, float]] | None:
    """Per name, max − min over the windows of each measure (a window without that name counts
    0), and the same of the windows' sums, times `scale` (1 per window; the number of windows
    in totals). `rows`: one per span, its name, window and measures. None with fewer than two
    windows."""
    if windows < 2:
        return None
    grid = rows[rows["window"] >= 0].groupby(["name", "window"])[measures].sum()
    per_name, of_sum = {}, {}
    for measure in measures:
        wide = grid[measure].unstack("window") if len(grid) else pd.DataFrame(dtype=float)
        wide = wide.reindex(columns=range(windows)).fillna(0.0)
        per_name[measure] = (wide.max(axis=1) - wide.min(axis=1)) * scale
        sums = wide.sum(axis=0)
        of_sum[measure] = float(sums.max() - sums.min()) * scale
    return pd.DataFrame(per_name), of_sum


def _kernel_rows(trace: Trace, win: pd.DataFrame) -> pd.DataFrame:
    """Each GPU operation launched in one of `win`: name, window, total µs."""
    s = trace.spans
    work = launched_rows(s, work_rows(s), s.index.get_indexer(win.index))
    return pd.DataFrame(
        {
            "name": s["name"].to_numpy()[work],
            "window": _window_of(s, s["link"].to_numpy()[work], win),
            "total_us": s["dur_us"].to_numpy()[work],
        }
    )


def _operator_rows(trace: Trace, win: pd.DataFrame) -> pd.DataFrame:
    """Each CPU operator span that starts in one of `win`: name, window, total and self µs,
    counted as operator_sums counts them (an op's redispatch to itself adds no total time)."""
    s = trace.spans
    rows = operator_rows(s)
    rows = rows[starts_inside(s, rows, s.index.get_indexer(win.index))]
    own = own_calls(s, rows)
    return pd.DataFrame(
        {
            "name": s["name"].to_numpy()[rows],
            "window": _window_of(s, rows, win),
            "total_us": np.where(own, s["dur_us"].to_numpy()[rows], 0.0),
            "self_us": s["self_us"].to_numpy()[rows],
        }
    )


def _window_of(s: pd.DataFrame, rows: np.ndarray, win: pd.DataFrame) -> np.ndarray:
    """For each of `rows` (CPU spans), the position in `win` of the window it starts in (−1 for
    none), as starts_inside decides: a ProfilerStep, attn_bwd or attn_step holds every
    thread's spans, an attn_fwd span its own thread's. Of nested windows the innermost that
    still holds the span wins (the latest to start). The rows are sorted by start once (and by
    thread and start); each window is two binary searches and the slice it holds: a 10⁶-event
    trace has ~3,000 forwards, and a pass over every row per window took 12 s there."""
    start, end = s["start_us"].to_numpy(), s["end_us"].to_numpy()
    spots = s.index.get_indexer(win.index)
    thread = s.groupby(["pid", "tid"], observed=True, sort=False).ngroup().to_numpy()
    names = win["name"].astype(str)
    every = (names.str.startswith("ProfilerStep#") | names.isin(ALL_THREADS)).to_numpy()
    times, threads, found = start[rows], thread[rows], np.full(len(rows), -1)
    by_time = np.argsort(times, kind="stable")
    by_thread = np.lexsort((times, threads))
    sorted_times = {True: times[by_time], False: times[by_thread]}  # sliced, never copied
    thread_starts = np.searchsorted(threads[by_thread], np.arange(thread.max(initial=0) + 2))
    for position in np.argsort(start[spots], kind="stable"):
        spot, all_threads = spots[position], bool(every[position])
        order = by_time if all_threads else by_thread
        first, last = (
            (0, len(rows)) if all_threads else thread_starts[thread[spot] : thread[spot] + 2]
        )
        held = sorted_times[all_threads][first:last]
        low = first + np.searchsorted(held, start[spot], side="left")
        high = first + np.searchsorted(held, end[spot], side="right")
        found[order[low:high]] = position
    return found


def structural_weight(table: pd.DataFrame, measure: str = "total_us") -> np.ndarray:
    """What each row's change in calls costs, robust to noise: a name on one side only, all of
    its time; one called a different number of times, the calls added or dropped times the
    cheaper side's time per call, or the change in time beyond the spread when it moves with
    the count (more calls, more time), whichever is more. A count change whose time moved the
    other way (2 fewer calls, +2,683 µs) is noise in time, not a costly change."""
    count_a, count_b = table["count_a"].to_numpy(), table["count_b"].to_numpy()
    time_a, time_b = table[f"{measure}_a"].to_numpy(), table[f"{measure}_b"].to_numpy()
    delta, delta_count = time_b - time_a, count_b - count_a
    both = (count_a > 0) & (count_b > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_call = np.where(both, np.minimum(time_a / count_a, time_b / count_b), 0.0)
    floor = np.abs(delta_count) * per_call
    spread = table[_spread_column(measure)].fillna(0.0).to_numpy()
    agrees = np.sign(delta) == np.sign(delta_count)
    beyond = np.where(agrees, np.abs(delta) - spread, 0.0).clip(min=0.0)
    one_sided = table["where"].to_numpy() != "both"
    return np.where(one_sided, np.abs(delta), np.maximum(floor, beyond))


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    """Structural changes first (by what they cost), then the rest by |Δ total µs|; ties keep
    name order (a stable sort over the name-ordered join)."""
    rank = table["change"].map({change: i for i, change in enumerate(CHANGES)}).to_numpy()
    counted = table["change"].to_numpy() == "count"
    weight = np.where(counted, structural_weight(table), table["delta_us"].abs().to_numpy())
    order = np.lexsort((-weight, rank))
    return table.iloc[order].reset_index(drop=True)
