"""Diff: what changed between two traces, per kernel name and per operator.

Perfetto cannot diff two traces; this reads the change off directly: "in-place removes one
Memcpy per forward", "math adds 18 kernels". Both sides are counted over the same kind of
window (GPU work launched inside the attn_fwd spans, else the active ProfilerSteps, else the
whole trace) and, by default, divided by that side's number of forwards, so two runs with
different step counts still compare per forward.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from profiling.analyze import operator_sums
from profiling.kernels import classify, short_name
from profiling.summary import forward_spans, gpu_work, launched_within, starts_inside
from profiling.trace import Trace, load
from profiling.trace_query import operator_rows

TraceLike = Trace | str | Path | bytes

KERNEL_DIFF_COLUMNS = [
    "kernel", "category", "where", "count_a", "count_b", "delta_count", "total_us_a",
    "total_us_b", "delta_us", "name",
]  # fmt: skip
OPERATOR_DIFF_COLUMNS = [
    "operator", "where", "count_a", "count_b", "delta_count", "total_us_a", "total_us_b",
    "delta_us", "self_us_a", "self_us_b", "delta_self_us",
]  # fmt: skip


def diff(
    trace_a: TraceLike,
    trace_b: TraceLike,
    label_a: str = "A",
    label_b: str = "B",
    per_forward: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kernel delta table, operator delta table), each sorted by |Δ total µs|, largest first.

    Deltas are B − A. Columns end in `_a` / `_b`; `labelled()` renames them for display, and
    both tables carry `attrs["labels"]`, `attrs["divisors"]` and `attrs["scopes"]`.
    """
    a, b = as_trace(trace_a), as_trace(trace_b)
    wa, sa, ua = windows(a)
    wb, sb, ub = windows(b)
    na = (len(wa) or 1) if per_forward else 1
    nb = (len(wb) or 1) if per_forward else 1
    kernels = _delta(
        _kernel_totals(a, wa, na), _kernel_totals(b, wb, nb), ["count", "total_us"], "name"
    )
    kernels["kernel"] = kernels["name"].map(short_name)
    kernels["category"] = kernels["name"].map(classify)
    kernels = _sorted(kernels)[KERNEL_DIFF_COLUMNS]
    operators = _delta(
        _operator_totals(a, wa, na),
        _operator_totals(b, wb, nb),
        ["count", "total_us", "self_us"],
        "operator",
    )
    operators = _sorted(operators)[OPERATOR_DIFF_COLUMNS]
    for table in (kernels, operators):
        table.attrs.update(
            labels=(label_a, label_b),
            divisors=(na, nb),
            scopes=(sa, sb),
            per_forward=per_forward,
            units=(ua, ub) if per_forward else ("in total", "in total"),
        )
    return kernels, operators


def as_trace(source: TraceLike) -> Trace:
    """A Trace as is; a path or bytes parsed (plain or gzip JSON)."""
    return source if isinstance(source, Trace) else load(source)


def windows(trace: Trace) -> tuple[pd.DataFrame, str, str]:
    """The windows one side is counted over (attn_fwd spans, else ProfilerSteps, else none),
    what they are, and the unit a count per window is in."""
    forwards = forward_spans(trace)
    if not forwards.empty:
        return forwards, f"{len(forwards)} attn_fwd spans", "per forward"
    steps = trace.steps()
    if not steps.empty:
        return steps, f"{len(steps)} ProfilerSteps (no attn_fwd spans)", "per step"
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
    }
    out = table.rename(columns=names)
    out["where"] = out["where"].map({"both": "both", "a": f"only {la}", "b": f"only {lb}"})
    return out


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


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    order = table["delta_us"].abs().sort_values(ascending=False, kind="stable").index
    return table.loc[order].reset_index(drop=True)
