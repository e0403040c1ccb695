"""A run's own trace read with plain Python loops: the fast path behind issue #7's overhead.

Why a second reader: a Profile run's trace holds ~100–600 events, and on tables that small
every pandas or numpy call costs more than its work: the vectorised path (trace.load →
forward_work → per_forward → kernel_table → gantt_spec), which a 10⁶-event upload needs, is
several times slower than loops over plain records there, a difference that decides whether a
fused kernel's run stays within 1.5× of the post's script (docs/performance.md, "What plain
Python loops could reach").

So a run reads its trace here with the same rules (and the same helpers where a rule is a
function: lane labels, kernel names, the kernel table's frame; profiling.run.gantt_records draws
the Gantt with the Gantt's own); the launch statistics read the spans table's columns, which
`span_columns` builds from the records. It takes what torch.profiler writes for a run: typed
events on properly nested lanes, at most MAX_EVENTS of them, few enough for one Gantt bar each
in at most MAX_ROWS rows. Anything else (partial overlaps that need renesting, untyped fields,
a big trace) gives None, and profiling.run.trace hands the same bytes to the trace model.
tests/run/test_small_trace.py holds the two paths equal on every fixture and on live CPU runs.
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

from profiling.analysis.summary import ForwardStats, cpu_dominant, forward_stats
from profiling.gantt.detail import DETAIL_LIMIT
from profiling.gantt.rows import MAX_ROWS
from profiling.kernels.names import decode, kernel_frame, sdpa_backend_of_kernels, short_name
from profiling.trace import events as trace_events
from profiling.trace.columns import from_codes
from profiling.vocabulary import ALL_THREADS, BACKEND_OPS, FORWARD, GPU_WORK

MAX_EVENTS = 20_000  # beyond this the vectorised path is the faster one anyway
MAX_BYTES = 16 * 1024**2
_GPU_CATS = frozenset(trace_events.GPU_CATS)
_LAUNCH_CATS = frozenset(trace_events.LAUNCH_CATS)


class Span:
    """One complete event, with what the trace model derives for it (its columns, one row)."""

    __slots__ = (
        "ann", "args", "cat", "category", "correlation", "depth", "dur", "end", "gpu", "index",
        "lane", "launch", "link", "name", "own_step", "parent", "pid", "self_us", "start", "step",
        "tid",
    )  # fmt: skip

    def __init__(self, event: Any) -> None:
        self.cat = cat = event.cat.lower()
        self.category = trace_events.CATEGORY.get(cat, cat or "other")
        self.gpu = cat in _GPU_CATS
        self.ann = cat == "gpu_user_annotation"
        self.launch = cat in _LAUNCH_CATS
        self.name = event.name
        # N of a ProfilerStep#N span, -1 for any other
        self.own_step = -1 if self.gpu else trace_events.step_number(event.name)
        self.pid, self.tid = str(event.pid), str(event.tid)
        self.start = float(event.ts)  # absolute until _build knows time zero
        self.dur = event.dur
        self.end = 0.0
        self.correlation = -1
        self.args: Any = {}
        if self.gpu or self.launch:
            self.correlation = trace_events.valid_id(event.args.correlation)
            if self.gpu:
                self.args = event.args
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
        return any(span.gpu for span in self.spans)


def read(path: str | Path) -> SmallTrace | None:
    """The trace at `path` as records, or None when it is not a run's small, tidy trace."""
    try:
        data = trace_events.read_bytes(path, MAX_BYTES)
    except trace_events.TraceError:
        return None
    return parse(data)


def parse(data: bytes) -> SmallTrace | None:
    """A trace's JSON bytes as records, or None when they are not a run's small, tidy trace."""
    if len(data) > MAX_BYTES:
        return None
    try:
        events = trace_events.typed_events(data)
    except (
        trace_events.TraceError,
        msgspec.DecodeError,
        msgspec.ValidationError,
        KeyError,
        TypeError,
        RecursionError,
    ):
        return None
    if len(events) > MAX_EVENTS:
        return None
    return _build(events)


def _build(events: list[Any]) -> SmallTrace | None:
    """The model's _build for typed events, or None where the model would read them otherwise."""
    complete = []
    categories = set()
    for event in events:
        if event.ph != "X":
            continue
        if event.cat == "Trace":  # the profiler's own bar: no span, but a category in the model
            categories.add(trace_events.CATEGORY.get("trace", "trace"))
            continue
        if event.ts is None or event.dur is None:
            return None  # the model counts these as skipped: leave them to it
        if not (math.isfinite(event.ts) and math.isfinite(event.dur)) or event.dur < 0:
            return None
        if (
            type(event.pid) is not int
            or type(event.tid) is not int
            or "\0" in event.name
            or "\0" in event.cat
        ):
            return None  # the model reads numeric strings as ints and drops trailing NULs
        if event.args.has_shapes():
            return None  # recorded shapes (never a run's own): the model keeps them for roles
        complete.append(event)
    if not complete:
        return None
    spans = [Span(event) for event in complete]
    steps_ts = [span.start for span in spans if span.own_step >= 0]
    # numpy's min, as the model's: of 0.0 and -0.0 it may keep either, Python's keeps the first
    time_zero = float(np.min(steps_ts if steps_ts else [span.start for span in spans]))
    for span in spans:  # times from time zero, the end from the shifted start (as the model's)
        span.start -= time_zero
        span.end = span.start + span.dur
    metadata = trace_events.lane_metadata([event for event in events if event.ph == "M"])
    metadata = trace_events.device_labels(metadata, {(s.pid, s.cat) for s in spans if s.gpu})
    lanes = _lanes(spans, metadata)
    spans.sort(key=lambda span: (span.lane, span.start, -span.dur))  # stable: as np.lexsort
    for i, span in enumerate(spans):
        span.index = i
    if not _nest(spans):
        return None
    if len(spans) > DETAIL_LIMIT or _row_count(spans, len(lanes)) > MAX_ROWS:
        return None  # the Gantt needs the level of detail or the row limit: the model's figure
    _link(spans)
    _step(spans)
    categories.update(span.category for span in spans)
    return SmallTrace(spans, lanes, sorted({span.name for span in spans}), sorted(categories))


def by_start(spans: Iterable[Span]) -> list[Span]:
    """In time order; ties keep row order (the model's stable argsort)."""
    return sorted(spans, key=attrgetter("start"))


def _lanes(spans: list[Span], names: dict[tuple[str, str], str]) -> list[str]:
    """trace._lanes' labels and order; sets each span's lane number."""
    label: dict[tuple[str, str, bool, bool], str] = {}
    order = []
    for span in spans:
        key = (span.pid, span.tid, span.gpu, span.ann)
        if key not in label:
            sort, label[key] = trace_events.lane_label(*key, names)
            order.append((*sort, label[key]))
    lanes = list(dict.fromkeys(text for *_, text in sorted(order)))
    position = {text: i for i, text in enumerate(lanes)}
    for span in spans:
        span.lane = position[label[(span.pid, span.tid, span.gpu, span.ann)]]
    return lanes


def _nest(spans: list[Span]) -> bool:
    """Depth, parent and self time as trace._depth_and_overlap and _parents count them; False
    where a span crosses another's end (the model flags and renests those: its job)."""
    tolerance = trace_events.EPS_US
    for _, group in groupby(spans, key=attrgetter("lane")):
        lane = list(group)
        ends = sorted(span.end for span in lane)
        last_at: dict[int, int] = {}
        prev_max = -math.inf
        for position, span in enumerate(lane):
            if span.start < prev_max - tolerance and span.end > prev_max + tolerance:
                return False
            prev_max = max(prev_max, span.end)
            zero_length = span.end <= span.start + tolerance  # then its own end is counted
            ended = bisect_right(ends, span.start + tolerance) - zero_length
            span.depth = max(position - ended, 0)
            span.parent = last_at.get(span.depth - 1, -1) if span.depth else -1
            last_at[span.depth] = span.index
    for span in spans:
        if span.parent >= 0:
            parent_span = spans[span.parent]
            if span.end > parent_span.end + tolerance:
                return False
            parent_span.self_us += span.dur
    for span in spans:  # dur minus the children's summed time, in row order as np.bincount adds
        span.self_us = max(span.dur - span.self_us, 0.0)
    return True


def _link(spans: list[Span]) -> None:
    """GPU work ↔ its launch through the correlation id (first of each, as trace._links)."""
    first_launch: dict[int, int] = {}
    first_work: dict[int, int] = {}
    for span in spans:
        if span.correlation < 0:
            continue
        if span.launch:
            first_launch.setdefault(span.correlation, span.index)
        elif span.gpu and not span.ann:
            first_work.setdefault(span.correlation, span.index)
    if not first_launch or not first_work:
        return
    for span in spans:
        if span.correlation < 0:
            continue
        if span.launch:
            span.link = first_work.get(span.correlation, -1)
        elif span.gpu and not span.ann:
            span.link = first_launch.get(span.correlation, -1)


def _step(spans: list[Span]) -> None:
    """ProfilerStep number per span (GPU work: its launch's), as trace._steps."""
    steps = by_start(span for span in spans if span.own_step >= 0)
    if not steps:
        return
    starts = [span.start for span in steps]
    for span in spans:
        if span.gpu:
            continue
        i = bisect_right(starts, span.start) - 1
        if i >= 0 and span.start <= steps[i].end:
            span.step = steps[i].own_step
    for span in spans:
        if span.gpu and span.link >= 0:
            span.step = spans[span.link].step


# -- per-forward figures and the kernel table (summary.forward_work / per_forward) ----------
def forward_work(trace: SmallTrace, name: str = FORWARD) -> tuple[list[Span], list[Span]]:
    """(the forward windows, the GPU work launched inside them), as summary.forward_work."""
    spans = trace.spans
    windows = [
        span
        for span in spans
        if not span.gpu and span.name == name and span.category == "annotation"
    ]
    if not windows:
        windows = [span for span in spans if span.own_step >= 0]
    work = [span for span in spans if span.gpu and span.category in GPU_WORK]
    if windows:
        work = [span for span in work if span.link >= 0 and _inside(spans[span.link], windows)]
    return windows, work


def _inside(launch: Span, windows: list[Span]) -> bool:
    """A ProfilerStep, attn_bwd or attn_step window holds every thread's launches, an
    attn_fwd window its own."""
    launched_at, thread = launch.start, (launch.pid, launch.tid)
    return any(
        window.start <= launched_at <= window.end
        and (
            window.own_step >= 0 or window.name in ALL_THREADS or (window.pid, window.tid) == thread
        )
        for window in windows
    )


def per_forward(
    trace: SmallTrace, windows: list[Span], work: list[Span], *, own_run: bool = False
) -> ForwardStats:
    """summary.per_forward, through the same summary.forward_stats."""
    has_gpu = trace.has_gpu
    dominant = ("", "")
    if work:
        top = _top(trace, [(span.name, span.dur) for span in work])
        dominant = short_name(top), decode(top, own_run=own_run)
    elif not has_gpu:
        ops = [(span.name, span.self_us) for span in trace.spans if span.category == "cpu op"]
        if ops:
            dominant = cpu_dominant(_top(trace, ops))
    return forward_stats(
        window_us=np.array([window.dur for window in windows], dtype=float),
        work_us=np.array([span.dur for span in work], dtype=float),
        counts=[sum(span.category == category for span in work) for category in GPU_WORK],
        has_gpu=has_gpu,
        dominant=dominant,
        backend=_backend(trace, windows) or sdpa_backend_of_kernels(span.name for span in work),
        work_steps=np.array([span.step for span in work], dtype=float),
    )


def _top(trace: SmallTrace, weighted: list[tuple[str, float]]) -> str:
    """summary._top: the largest summed weight, ties to the first name in sorted order."""
    totals = dict.fromkeys(trace.names, 0.0)
    for name, weight in weighted:
        totals[name] += weight
    return max(trace.names, key=totals.__getitem__)


def _backend(trace: SmallTrace, windows: list[Span]) -> str | None:
    """summary.sdpa_backend: the SDPA backends whose aten op ran inside the windows."""
    ops = [span for span in trace.spans if not span.gpu and span.name in BACKEND_OPS]
    if windows and ops:
        first, last = min(window.start for window in windows), max(window.end for window in windows)
        ops = [span for span in ops if first <= span.start <= last]
    found = list(dict.fromkeys(BACKEND_OPS[span.name] for span in ops))
    return " + ".join(found) if found else None


def kernel_table(
    work: list[Span], per: int = 1, *, own_run: bool = False, roles: list[str] | None = None
) -> pd.DataFrame:
    """kernels.kernel_table: codes in order of first appearance, then the shared frame builder."""
    codes: dict[str, int] = {}
    for span in work:
        codes.setdefault(span.name, len(codes))
    return kernel_frame(
        np.array([codes[span.name] for span in work], dtype=np.int64),
        list(codes),
        np.array([span.dur for span in work], dtype=float),
        [span.args for span in work],
        per,
        own_run=own_run,
        roles=roles,
    )


# -- the spans table's columns, for the launch statistics and Compare's timelines -----------
def span_columns(trace: SmallTrace) -> pd.DataFrame:
    """The columns of the model's spans table that analysis.launch and compare.timeline read,
    from the records: the same values and dtypes (categoricals on the sorted distinct values,
    lanes in display order), so both readers' traces go through the same launch rules."""
    spans = trace.spans
    return pd.DataFrame(
        {
            "lane": from_codes(np.array([span.lane for span in spans]), trace.lanes, ordered=True),
            "kind": from_codes(
                np.array([span.gpu for span in spans], dtype=np.int8), ["cpu", "gpu"]
            ),
            "pid": _categorical([span.pid for span in spans]),
            "tid": _categorical([span.tid for span in spans]),
            "name": _categorical([span.name for span in spans], trace.names),
            "category": _categorical([span.category for span in spans], trace.categories),
            "start_us": np.array([span.start for span in spans], dtype=float),
            "dur_us": np.array([span.dur for span in spans], dtype=float),
            "end_us": np.array([span.end for span in spans], dtype=float),
            "correlation": np.array([span.correlation for span in spans], dtype=np.int64),
            "link": np.array([span.link for span in spans], dtype=np.int64),
            "step": np.array([span.step for span in spans], dtype=np.int64),
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
    for span in spans:
        deepest[span.lane] = max(deepest[span.lane], span.depth)
    return deepest


def _row_count(spans: list[Span], lanes: int) -> int:
    return sum(levels + 1 for levels in deepest_levels(spans, lanes))
