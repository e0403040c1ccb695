"""Per launch and per kernel: what each GPU work item cost on the CPU to launch, and how long
it waited to start (the definitions are profiling.analysis.launch's, after HTA's).

The row-level half of the launch figures: launch scopes the GPU work and reads the
device busy/idle time, this module turns the linked launches into the per-launch and
per-kernel tables. Numpy over row positions, each frame built once (see profiling.analysis.launch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from profiling.analysis.summary import work_rows
from profiling.kernels.names import short_name
from profiling.trace.columns import from_codes
from profiling.trace.model import Trace
from profiling.trace.query import factorize_texts, values_at

LAUNCH_COLUMNS = [
    "kernel", "category", "launch_api", "correlation", "step", "launch_start_us",
    "cpu_launch_us", "gpu_start_us", "gpu_us", "launch_delay_us", "launch_to_start_us", "name",
]  # fmt: skip
PER_KERNEL_COLUMNS = [
    "kernel", "category", "launch_api", "count", "cpu_launch_mean_us", "cpu_launch_max_us",
    "launch_delay_mean_us", "launch_delay_max_us", "launch_to_start_mean_us",
    "launch_to_start_max_us", "gpu_mean_us", "name",
]  # fmt: skip
MEAN_COLUMNS = ["cpu_launch_us", "launch_delay_us", "launch_to_start_us", "gpu_us"]


def launch_table(trace: Trace, work: pd.DataFrame) -> pd.DataFrame:
    """One row per GPU work item that has a linked launch span, in launch order."""
    launches = launch_columns(trace.spans, work, np.arange(len(work)))
    return launch_frame(launches)


def per_kernel_table(per_launch: pd.DataFrame) -> pd.DataFrame:
    """Launch figures aggregated per GPU work name, in the order of first launch."""
    if per_launch.empty:
        return pd.DataFrame(columns=PER_KERNEL_COLUMNS)
    needed = ["name", "kernel", "category", "launch_api", *MEAN_COLUMNS]
    return per_kernel_frame({c: per_launch[c].to_numpy() for c in needed})


def launch_columns(
    spans: pd.DataFrame, work: pd.DataFrame, rows: np.ndarray
) -> dict[str, Any] | None:
    """launch_table's columns for `rows` of `work` (their launches are rows of `spans`), in
    launch order; None when none of them has a linked launch."""
    link = work["link"].to_numpy()[rows]
    linked, link = rows[link >= 0], link[link >= 0]
    if not len(linked):
        return None
    l_start = spans["start_us"].to_numpy(float)[link]
    l_dur = spans["dur_us"].to_numpy(float)[link]
    g_start = work["start_us"].to_numpy(float)[linked]
    columns = {
        "kernel": _text(work["name"], linked, short_name),
        "category": _text(work["category"], linked),
        "launch_api": _text(spans["name"], link),
        "correlation": work["correlation"].to_numpy()[linked],
        "step": work["step"].to_numpy()[linked],
        "launch_start_us": l_start,
        "cpu_launch_us": l_dur,
        "gpu_start_us": g_start,
        "gpu_us": work["dur_us"].to_numpy(float)[linked],
        "launch_delay_us": np.clip(g_start - (l_start + l_dur), 0.0, None),
        "launch_to_start_us": g_start - l_start,
        "name": _text(work["name"], linked),
    }
    order = np.argsort(l_start, kind="stable")
    return {c: values[order] for c, values in columns.items()}


def launch_calls(
    spans: pd.DataFrame, rows: np.ndarray
) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """The CPU µs of each distinct launch span behind GPU work `rows` (a graph replay's one
    cudaGraphLaunch is linked from each of its kernels: counted once), and per launch name
    whose calls started several GPU items each: (name, calls, GPU items they started)."""
    link = spans["link"].to_numpy()[rows]
    calls, items = np.unique(link[link >= 0], return_counts=True)
    multi = calls[items > 1]
    names = values_at(spans["name"], multi)
    grouped: dict[str, list[int]] = {}
    for name, started in zip(names, items[items > 1].tolist(), strict=True):
        grouped.setdefault(str(name), []).append(started)
    found = [(name, len(each), sum(each)) for name, each in grouped.items()]
    calls = calls[np.argsort(spans["start_us"].to_numpy(float)[calls], kind="stable")]
    return spans["dur_us"].to_numpy(float)[calls], found  # in launch order, as per_launch


def unlinked_work(spans: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPU work left out of `rows` because no launch in the trace points to it (its launch
    was not recorded: a graph replayed by a launch outside the trace, a warm-up's leftovers),
    and all GPU work (what it is a share of)."""
    work = work_rows(spans)
    # a mask over the rows, not np.setdiff1d: its hash of 10⁷ rows took 1.3 s, this 0.05 s
    left_out = np.zeros(len(spans), dtype=bool)
    left_out[work[spans["link"].to_numpy()[work] < 0]] = True
    left_out[rows] = False
    return np.flatnonzero(left_out), work


def _text(column: pd.Series, rows: np.ndarray, fn: Callable[[Any], str] = str) -> Any:
    """`fn` of the column's value at each of `rows` as a categorical, `fn` called once per
    distinct value at `rows`: a trace's 10⁵ launches share a few hundred names, and an object
    column of them would cost pandas a hash (or an Arrow copy) of every row's string. Values
    no row holds are left out (a 10⁷-event trace names 4·10⁴ ProfilerSteps: short_name of
    each took ~1 s, issue 42)."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return pd.Categorical(np.array([fn(v) for v in values_at(column, rows)], dtype=object))
    codes = column.array.codes[rows]
    categories = column.cat.categories
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(categories)))
    mapped = np.full(len(categories), -1, dtype=np.int64)
    mapped[used], values = factorize_texts([fn(categories[i]) for i in used.tolist()])
    return from_codes(np.where(codes >= 0, mapped[codes], -1), values)


def launch_frame(launches: dict[str, Any] | None) -> pd.DataFrame:
    """The per-launch table (its text columns categorical, see _text)."""
    if launches is None:
        return pd.DataFrame(columns=LAUNCH_COLUMNS)
    return pd.DataFrame(launches)


def per_kernel_frame(launches: dict[str, np.ndarray] | None) -> pd.DataFrame:
    """per_kernel_table from launch_table's columns: one row per name, in order of first launch
    (the order of `groupby(sort=False)`)."""
    if launches is None:
        return pd.DataFrame(columns=PER_KERNEL_COLUMNS)
    group, names = pd.factorize(launches["name"])
    names = np.asarray(names, dtype=object)
    count = np.bincount(group, minlength=len(names))
    order = np.argsort(group, kind="stable")  # rows name by name, in launch order
    starts = np.cumsum(count) - count
    first = order[starts]
    apis: list[list[str]] = [[] for _ in names]
    pairs = zip(group.tolist(), launches["launch_api"].tolist(), strict=True)
    for g, api in dict.fromkeys(pairs):  # each (name, API) pair once, in order of first launch
        apis[g].append(api)
    means = [np.bincount(group, weights=launches[c], minlength=len(names)) / count
             for c in MEAN_COLUMNS]  # fmt: skip
    high = [np.maximum.reduceat(launches[c][order], starts) for c in MEAN_COLUMNS[:3]]
    table = {
        "kernel": np.asarray(launches["kernel"][first], dtype=object),
        "category": np.asarray(launches["category"][first], dtype=object),
        "launch_api": [", ".join(a) for a in apis],
        "count": count,
        "cpu_launch_mean_us": means[0],
        "cpu_launch_max_us": high[0],
        "launch_delay_mean_us": means[1],
        "launch_delay_max_us": high[1],
        "launch_to_start_mean_us": means[2],
        "launch_to_start_max_us": high[2],
        "gpu_mean_us": means[3],
        "name": names,
    }
    return pd.DataFrame(table)
