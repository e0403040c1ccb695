"""A run's own trace read with plain Python loops: the fast path behind issue #7's overhead.

Why a second reader: a Profile run's trace holds ~100–600 events, and on tables that small
every pandas or numpy call costs more than its work. The vectorised path (trace.load →
forward_work → per_forward → kernel_table → gantt_spec), which a 10⁶-event upload needs, took
3.9–4.7 ms in a tight loop on the H200 host where loops over plain records took 0.2–0.3 ms
(benchmarks/plain_floor.py); for the fused kernels, whose whole bare script is 6–12 ms, that
difference decides whether a run stays within 1.5× of the post's script.

So a run reads its trace here with the same rules (and the same helpers where a rule is a
function: lane labels, kernel names, the kernel table's frame; profiling.gantt_records draws
the Gantt with the Gantt's own); the launch statistics read the spans table's columns, which
`span_columns` builds from the records. It takes what torch.profiler writes for a run: typed
events on properly nested lanes, at most MAX_EVENTS of them, few enough for one Gantt bar each
in at most MAX_ROWS rows. Anything else (partial overlaps that need renesting, untyped fields,
a big trace) gives None, and profiling.run_trace hands the same bytes to the trace model.
tests/test_small_trace.py holds the two paths equal on every fixture and on live CPU runs.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from profiling import trace_events as tm
from profiling.gantt_detail import DETAIL_LIMIT
from profiling.gantt_rows import MAX_ROWS
from profiling.kernels import decode, kernel_frame, short_name
from profiling.summary import ForwardStats, cpu_dominant, forward_stats
from profiling.trace_columns import from_codes
from profiling.vocabulary import BACKEND_OPS, FORWARD, GPU_WORK

MAX_EVENTS = 20_000  # beyond this the vectorised path is the faster one anyway
MAX_BYTES = 16 * 1024**2
_GPU_CATS = frozenset(tm.GPU_CATS)
_LAUNCH_CATS = frozenset(tm.LAUNCH_CATS)


class Span:
    """One complete event, with what the trace model derives for it (its columns, one row)."""

    __slots__ = (
        "ann",
        "args",
        "cat",
        "category",
        "correlation",
        "depth",
        "dur",
        "end",
        "gpu",
        "index",
        "lane",
        "launch",
        "link",
        "name",
        "own_step",
        "parent",
        "pid",
        "self_us",
        "start",
        "step",
        "tid",
    )  # fmt: skip

    def __init__(self, e: Any) -> None:
        self.cat = cat = e.cat.lower()
        self.category = tm.CATEGORY.get(cat, cat or "other")
        self.gpu = cat in _GPU_CATS
        self.ann = cat == "gpu_user_annotation"
        self.launch = cat in _LAUNCH_CATS
        self.name = e.name
        self.own_step = -1 if self.gpu else tm.step_number(e.name)  # N of a ProfilerStep#N span
        self.pid, self.tid = str(e.pid), str(e.tid)
        self.start = float(e.ts)  # absolute until _build knows time zero
        self.dur = e.dur
        self.end = 0.0
        self.correlation = -1
        self.args: Any = {}
        if self.gpu or self.launch:
            self.correlation = tm.valid_id(e.args.correlation)
            if self.gpu:
                self.args = e.args
        self.index = self.lane = self.depth = 0
        self.parent = self.link = self.step = -1
        self.self_us = 0.0


@dataclass
class SmallTrace:
    """A run's trace as plain records in the spans table's row order, and its lanes."""

    spans: list[Span]
    lanes: list[str]
    names: list[str]  # every distinct name, sorted: the model's category order, for ties
    categories: list[str]  # the model's `category` values, sorted (its profiler bar's too)

    @property
    def has_gpu(self) -> bool:
        """Any GPU span at all (a CPU run has none: its GPU figures are n/a, not 0)."""
        return any(s.gpu for s in self.spans)


def read(path: str | Path) -> SmallTrace | None:
    """The trace at `path` as records, or None when it is not a run's small, tidy trace."""
    try:
        data = tm.read_bytes(path, MAX_BYTES)
    except tm.TraceError:
        return None
    return parse(data)


def parse(data: bytes) -> SmallTrace | None:
    """A trace's JSON bytes as records, or None when they are not a run's small, tidy trace."""
    if len(data) > MAX_BYTES:
        return None
    try:
        events = tm.typed_events(data)
    except (tm.TraceError, msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError,
            RecursionError):  # fmt: skip
        return None
    if len(events) > MAX_EVENTS:
        return None
    return _build(events)


def _build(events: list[Any]) -> SmallTrace | None:
    """The model's _build for typed events, or None where the model would read them otherwise."""
    complete = []
    categories = set()
    for e in events:
        if e.ph != "X":
            continue
        if e.cat == "Trace":  # the profiler's own bar: no span, but a category in the model
            categories.add(tm.CATEGORY.get("trace", "trace"))
            continue
        if e.ts is None or e.dur is None:
            return None  # the model counts these as skipped: leave them to it
        if not (math.isfinite(e.ts) and math.isfinite(e.dur)) or e.dur < 0:
            return None
        if type(e.pid) is not int or type(e.tid) is not int or "\0" in e.name or "\0" in e.cat:
            return None  # the model reads numeric strings as ints and drops trailing NULs
        complete.append(e)
    if not complete:
        return None
    spans = [Span(e) for e in complete]
    steps_ts = [s.start for s in spans if s.own_step >= 0]
    # numpy's min, as the model's: of 0.0 and -0.0 it may keep either, Python's keeps the first
    t0 = float(np.min(steps_ts if steps_ts else [s.start for s in spans]))
    for s in spans:  # times from time zero, the end from the shifted start (as the model's)
        s.start -= t0
        s.end = s.start + s.dur
    lanes = _lanes(spans, tm.lane_metadata([e for e in events if e.ph == "M"]))
    spans.sort(key=lambda s: (s.lane, s.start, -s.dur))  # stable: as np.lexsort
    for i, s in enumerate(spans):
        s.index = i
    if not _nest(spans):
        return None
    if len(spans) > DETAIL_LIMIT or _row_count(spans, len(lanes)) > MAX_ROWS:
        return None  # the Gantt needs the level of detail or the row limit: the model's figure
    _link(spans)
    _step(spans)
    categories.update(s.category for s in spans)
    return SmallTrace(spans, lanes, sorted({s.name for s in spans}), sorted(categories))


def by_start(spans: Iterable[Span]) -> list[Span]:
    """In time order; ties keep row order (the model's stable argsort)."""
    return sorted(spans, key=attrgetter("start"))


def _lanes(spans: list[Span], names: dict[tuple[str, str], str]) -> list[str]:
    """trace._lanes' labels and order; sets each span's lane number."""
    label: dict[tuple[str, str, bool, bool], str] = {}
    order = []
    for s in spans:
        key = (s.pid, s.tid, s.gpu, s.ann)
        if key not in label:
            sort, label[key] = tm.lane_label(*key, names)
            order.append((*sort, label[key]))
    lanes = list(dict.fromkeys(text for *_, text in sorted(order)))
    position = {text: i for i, text in enumerate(lanes)}
    for s in spans:
        s.lane = position[label[(s.pid, s.tid, s.gpu, s.ann)]]
    return lanes


def _nest(spans: list[Span]) -> bool:
    """Depth, parent and self time as trace._depth_and_overlap and _parents count them; False
    where a span crosses another's end (the model flags and renests those: its job)."""
    eps = tm.EPS_US
    for _, group in groupby(spans, key=attrgetter("lane")):
        lane = list(group)
        ends = sorted(s.end for s in lane)
        last_at: dict[int, int] = {}
        prev_max = -math.inf
        for j, s in enumerate(lane):
            if s.start < prev_max - eps and s.end > prev_max + eps:
                return False
            prev_max = max(prev_max, s.end)
            ended = bisect_right(ends, s.start + eps) - (s.end <= s.start + eps)
            s.depth = max(j - ended, 0)
            s.parent = last_at.get(s.depth - 1, -1) if s.depth else -1
            last_at[s.depth] = s.index
    for s in spans:
        if s.parent >= 0:
            up = spans[s.parent]
            if s.end > up.end + eps:
                return False
            up.self_us += s.dur
    for s in spans:  # dur minus the children's summed time, in row order as np.bincount adds
        s.self_us = max(s.dur - s.self_us, 0.0)
    return True


def _link(spans: list[Span]) -> None:
    """GPU work ↔ its launch through the correlation id (first of each, as trace._links)."""
    first_launch: dict[int, int] = {}
    first_work: dict[int, int] = {}
    for s in spans:
        if s.correlation < 0:
            continue
        if s.launch:
            first_launch.setdefault(s.correlation, s.index)
        elif s.gpu and not s.ann:
            first_work.setdefault(s.correlation, s.index)
    if not first_launch or not first_work:
        return
    for s in spans:
        if s.correlation < 0:
            continue
        if s.launch:
            s.link = first_work.get(s.correlation, -1)
        elif s.gpu and not s.ann:
            s.link = first_launch.get(s.correlation, -1)


def _step(spans: list[Span]) -> None:
    """ProfilerStep number per span (GPU work: its launch's), as trace._steps."""
    steps = by_start(s for s in spans if s.own_step >= 0)
    if not steps:
        return
    starts = [s.start for s in steps]
    for s in spans:
        if s.gpu:
            continue
        i = bisect_right(starts, s.start) - 1
        if i >= 0 and s.start <= steps[i].end:
            s.step = steps[i].own_step
    for s in spans:
        if s.gpu and s.link >= 0:
            s.step = spans[s.link].step


# -- per-forward figures and the kernel table (summary.forward_work / per_forward) ----------
def forward_work(t: SmallTrace, name: str = FORWARD) -> tuple[list[Span], list[Span]]:
    """(the forward windows, the GPU work launched inside them), as summary.forward_work."""
    spans = t.spans
    windows = [s for s in spans if not s.gpu and s.name == name and s.category == "annotation"]
    if not windows:
        windows = [s for s in spans if s.own_step >= 0]
    work = [s for s in spans if s.gpu and s.category in GPU_WORK]
    if windows:
        work = [s for s in work if s.link >= 0 and _inside(spans[s.link], windows)]
    return windows, work


def _inside(launch: Span, windows: list[Span]) -> bool:
    """A ProfilerStep window holds every thread's launches, an attn_fwd window its own."""
    t, thread = launch.start, (launch.pid, launch.tid)
    return any(
        w.start <= t <= w.end and (w.own_step >= 0 or (w.pid, w.tid) == thread) for w in windows
    )


def per_forward(
    t: SmallTrace, windows: list[Span], work: list[Span], *, own_run: bool = False
) -> ForwardStats:
    """summary.per_forward, through the same summary.forward_stats."""
    has_gpu = t.has_gpu
    dominant = ("", "")
    if work:
        top = _top(t, [(s.name, s.dur) for s in work])
        dominant = short_name(top), decode(top, own_run=own_run)
    elif not has_gpu:
        ops = [(s.name, s.self_us) for s in t.spans if s.category == "cpu op"]
        if ops:
            dominant = cpu_dominant(_top(t, ops))
    return forward_stats(
        np.array([w.dur for w in windows], dtype=float),
        np.array([s.dur for s in work], dtype=float),
        [sum(s.category == c for s in work) for c in GPU_WORK],
        has_gpu,
        dominant,
        _backend(t, windows),
    )


def _top(t: SmallTrace, weighted: list[tuple[str, float]]) -> str:
    """summary._top: the largest summed weight, ties to the first name in sorted order."""
    totals = dict.fromkeys(t.names, 0.0)
    for name, weight in weighted:
        totals[name] += weight
    return max(t.names, key=totals.__getitem__)


def _backend(t: SmallTrace, windows: list[Span]) -> str | None:
    ops = [s for s in t.spans if not s.gpu and s.name in BACKEND_OPS]
    if windows and ops:
        lo, hi = min(w.start for w in windows), max(w.end for w in windows)
        ops = [s for s in ops if lo <= s.start <= hi]
    found = list(dict.fromkeys(BACKEND_OPS[s.name] for s in ops))
    return " + ".join(found) if found else None


def kernel_table(work: list[Span], per: int = 1, *, own_run: bool = False) -> pd.DataFrame:
    """kernels.kernel_table: codes in order of first appearance, then the shared frame builder."""
    codes: dict[str, int] = {}
    for s in work:
        codes.setdefault(s.name, len(codes))
    return kernel_frame(
        np.array([codes[s.name] for s in work], dtype=np.int64),
        list(codes),
        np.array([s.dur for s in work], dtype=float),
        [s.args for s in work],
        per,
        own_run=own_run,
    )


# -- the spans table's columns, for the launch statistics and Compare's timelines -----------
def span_columns(t: SmallTrace) -> pd.DataFrame:
    """The columns of the model's spans table that profiling.launch and compare.timeline read,
    from the records: the same values and dtypes (categoricals on the sorted distinct values,
    lanes in display order), so both readers' traces go through the same launch rules."""
    spans = t.spans
    return pd.DataFrame(
        {
            "lane": from_codes(np.array([s.lane for s in spans]), t.lanes, ordered=True),
            "kind": from_codes(np.array([s.gpu for s in spans], dtype=np.int8), ["cpu", "gpu"]),
            "pid": _categorical([s.pid for s in spans]),
            "tid": _categorical([s.tid for s in spans]),
            "name": _categorical([s.name for s in spans], t.names),
            "category": _categorical([s.category for s in spans], t.categories),
            "start_us": np.array([s.start for s in spans], dtype=float),
            "dur_us": np.array([s.dur for s in spans], dtype=float),
            "end_us": np.array([s.end for s in spans], dtype=float),
            "correlation": np.array([s.correlation for s in spans], dtype=np.int64),
            "link": np.array([s.link for s in spans], dtype=np.int64),
            "step": np.array([s.step for s in spans], dtype=np.int64),
        },
        copy=False,
    )


def _categorical(values: list[str], categories: list[str] | None = None) -> pd.Categorical:
    """`values` coded into `categories` (default: their sorted distinct values, the model's)."""
    categories = sorted(set(values)) if categories is None else categories
    code = {value: i for i, value in enumerate(categories)}
    return from_codes(np.array([code[v] for v in values], dtype=np.int64), categories)


def deepest_levels(spans: list[Span], lanes: int) -> list[int]:
    """The deepest nesting level per lane (-1: a lane without spans): its Gantt rows."""
    deepest = [-1] * lanes
    for s in spans:
        deepest[s.lane] = max(deepest[s.lane], s.depth)
    return deepest


def _row_count(spans: list[Span], lanes: int) -> int:
    return sum(d + 1 for d in deepest_levels(spans, lanes))
