"""The trace model: any torch.profiler Chrome trace → one tidy table of spans.

Every view (kernel table, Gantt, per-forward summary, diff, analyse) reads this table and never
the raw JSON again, as HTA keeps parsing apart from its analyses. We parse ourselves instead of
using HTA because we need one small table per trace that also works on a user's upload, and a
million-event trace has to load in seconds: msgspec decodes events into slotted structs and
leaves each `args` as raw JSON until a row needs it (only GPU work and its launches do), names
are interned once (HTA's symbol-table idea), and depth, overlap, parents and links are numpy
over sorted arrays per lane instead of a per-event stack.

The steps live apart: profiling.trace.events reads and decodes the file, trace_columns interns
the events into columns, trace_nesting nests and links them, and trace_query holds the
questions the views ask of the finished table. This module puts them together.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiling.trace.columns import NO_ROWS, EventColumns, categorical, from_codes, lane_codes
from profiling.trace.events import (
    CATEGORY,
    DEFAULT_MAX_BYTES,
    DEVICE_WORDS,
    GPU_CATS,
    LAUNCH_CATS,
    TraceError,
    device_labels,
    step_number,
)
from profiling.trace.memory import collector_paused, small_pages, trim_heap
from profiling.trace.nesting import (
    depth_and_overlap,
    display_order,
    launch_links,
    parents,
    renest_crossings,
    self_time,
    step_of_spans,
)
from profiling.trace.query import is_in, step_rows
from profiling.trace.read import ReadEvents, read_events


@dataclass
class Trace:
    spans: pd.DataFrame
    t0_us: float  # absolute `ts` of time zero (the first ProfilerStep, else the first span)
    meta: dict[str, Any] = field(default_factory=dict)  # top-level keys except traceEvents
    lanes: list[str] = field(default_factory=list)  # display order: CPU lanes, then GPU lanes
    n_events: int = 0
    n_flows: int = 0
    skipped: int = 0  # complete events without a usable ts/dur (counted, not hidden)

    @property
    def device_properties(self) -> list[dict[str, Any]]:
        props = self.meta.get("deviceProperties") or []
        return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []

    @property
    def devices_ran_on(self) -> list[dict[str, Any]]:
        """The device properties of the GPUs its work ran on (Kineto writes a GPU's work under
        its id as pid): one of a host's eight where the run used one (issue 42: the summary
        listed all eight); every recorded device where no pid matches an id."""
        props = self.device_properties
        if len(props) < 2:
            return props
        gpu = self.spans["pid"][is_in(self.spans["kind"], "gpu")]
        used = set(map(str, gpu.unique()))
        return [p for p in props if str(p.get("id")) in used] or props

    @property
    def has_gpu(self) -> bool:
        return bool(is_in(self.spans["kind"], "gpu").any())

    def steps(self) -> pd.DataFrame:
        """ProfilerStep spans (the active steps of a scheduled run), in order."""
        return self.spans.iloc[step_rows(self.spans)]


def load(
    source: str | Path | bytes,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: Callable[[float], None] | None = None,
) -> Trace:
    """Parse a Chrome trace file (or its bytes), plain or gzip, streamed (profiling.trace.read);
    `progress` is told the fraction of the file read as it goes."""
    with collector_paused(), small_pages():
        try:
            read = read_events(source, max_bytes, progress)
            large = read.n_events >= LARGE_READ
            if large:  # the pieces' columns, merged, are freed heap now
                trim_heap()
            trace = _build(read)
        except RecursionError:  # msgspec's answer to JSON nested thousands of levels deep
            raise TraceError("not valid JSON (nested too deeply)") from None
    if large:  # and so are the build's
        trim_heap()
    return trace


LARGE_READ = 100_000  # events: a read this large hands its freed heap back (trace.memory)


def _build(read: ReadEvents) -> Trace:
    """Columns of the complete events → the spans table, put in display order (lane, start,
    longest first), then nested, linked and framed."""
    columns = read.columns
    arrays, lanes = _span_arrays(columns, read.lane_names)
    args = columns.args
    if not read.meta.get("record_shapes"):  # CPU ops keep their args only when asked
        args[~arrays.gpu] = [{}]
    columns.drop_rows()  # `arrays` holds them now: one copy of each column at a time
    steps = arrays.is_step
    t0 = float(arrays.start[steps].min()) if steps.any() else float(arrays.start.min())
    arrays.start -= t0
    order = display_order(arrays.lane, arrays.start, arrays.dur)
    args = args[order]
    spans = _spans_frame(arrays.sorted_by(order), args, columns, lanes)
    return Trace(
        spans=spans,
        t0_us=t0,
        meta=read.meta,
        lanes=lanes,
        n_events=read.n_events,
        n_flows=read.n_flows,
        skipped=columns.skipped,
    )


@dataclass
class _SpanArrays:
    """One array per fact about each span, in event order until `sorted_by` reorders them."""

    lane: np.ndarray  # index into the lanes in display order
    start: np.ndarray  # µs
    dur: np.ndarray
    gpu: np.ndarray
    launch: np.ndarray  # a runtime or driver call (a launch's CPU side)
    annotation: np.ndarray  # a GPU user annotation (its own lane above its stream)
    step_number: np.ndarray  # N of a ProfilerStep#N name, else -1
    is_step: np.ndarray  # a CPU span with a step's name
    correlation: np.ndarray
    external: np.ndarray
    cat: np.ndarray  # codes into EventColumns' value arrays, from here on
    name: np.ndarray
    pid: np.ndarray
    tid: np.ndarray

    def sorted_by(self, order: np.ndarray) -> _SpanArrays:
        """The arrays in `order`, each unsorted one dropped as its sorted copy is made (at 10⁷
        spans both sets at once were ~1 GB of the peak)."""
        ordered = {}
        for name in [f.name for f in fields(self)]:
            ordered[name] = getattr(self, name)[order]
            setattr(self, name, NO_ROWS)
        return _SpanArrays(**ordered)


def _span_arrays(
    columns: EventColumns, names_meta: dict[tuple[str, str], str]
) -> tuple[_SpanArrays, list[str]]:
    """Per-span arrays in event order, and the lanes in order."""
    cat, name = columns.cat_codes, columns.name_codes
    gpu = np.isin(columns.cats, list(GPU_CATS))[cat]
    launch = np.isin(columns.cats, list(LAUNCH_CATS))[cat]
    # ProfilerStep number per distinct name (-1: not a step), matched once per name
    number = np.array([step_number(n) for n in columns.names], dtype=np.int64)[name]
    annotation = (columns.cats == "gpu_user_annotation")[cat]
    names_meta = device_labels(names_meta, _device_kinds(columns))
    lane, lanes = lane_codes(
        gpu, columns.pid_codes, columns.tid_codes, annotation, columns.pids, columns.tids,
        names_meta,
    )  # fmt: skip
    arrays = _SpanArrays(
        lane=lane,
        start=columns.ts,
        dur=columns.dur,
        gpu=gpu,
        launch=launch,
        annotation=annotation,
        step_number=number,
        is_step=(number >= 0) & ~gpu,
        correlation=columns.correlation,
        external=columns.external,
        cat=cat,
        name=name,
        pid=columns.pid_codes,
        tid=columns.tid_codes,
    )
    return arrays, lanes


def _device_kinds(columns: EventColumns) -> list[tuple[str, str]]:
    """(pid, cat) of the devices whose work's cat names their kind (DEVICE_WORDS): one pass
    over the rows per such cat, none in a trace without one."""
    found = []
    for code, value in enumerate(columns.cats):
        kind = str(value).lower() if value is not None else ""
        if kind in DEVICE_WORDS:
            pids = np.unique(columns.pid_codes[columns.cat_codes == code])
            found += [(str(columns.pids[p]), kind) for p in pids]
    return found


def _spans_frame(
    spans: _SpanArrays, args: np.ndarray, columns: EventColumns, lanes: list[str]
) -> pd.DataFrame:
    """The spans table from arrays in display order, with depth, parents, links and steps.

    Every derived column is computed on plain arrays and the frame is built once at the end:
    a run's trace holds a few hundred spans, where each pandas operation costs more than the
    numpy work itself (this build was ~20 ms of a 70 ms app run). A large table's links,
    steps and text columns are made on a second thread while this one nests (numpy releases
    the GIL in its loops; the 2-core target's second core idled through the build).
    """
    lane, start, dur = spans.lane, spans.start, spans.dur
    end = start + dur
    with ThreadPoolExecutor(1) if len(lane) >= BESIDE_FROM else _Here() as beside:
        beside_columns = beside.submit(_linked_columns, spans, end, columns, lanes)
        depth, overlap = depth_and_overlap(lane, start, end)
        parent = parents(depth, lane)
        renest_crossings(lane, start, end, depth, parent, overlap)
        self_us = self_time(dur, parent)
        linked = beside_columns.result()
    return pd.DataFrame(
        {
            **linked["texts"],
            "start_us": start,
            "dur_us": dur,
            "end_us": end,
            "depth": depth,
            "parent": parent,
            "self_us": self_us,
            "overlap": overlap,
            "correlation": spans.correlation,
            "external_id": spans.external,
            "link": linked["link"],
            "step": linked["step"],
            "args": args,
        },
        copy=False,
    )


BESIDE_FROM = 100_000  # spans: below this a second thread costs more than it saves


def _linked_columns(
    spans: _SpanArrays, end: np.ndarray, columns: EventColumns, lanes: list[str]
) -> dict[str, Any]:
    """The columns that need no nesting: launch links, each span's step, the text columns."""
    link = launch_links(spans.correlation, spans.gpu & ~spans.annotation, spans.launch)
    category_of = np.array([CATEGORY.get(c, c or "other") for c in columns.cats], dtype=object)
    texts = {
        "lane": from_codes(spans.lane, lanes, ordered=True),
        "kind": from_codes(spans.gpu.astype(np.int8), ["cpu", "gpu"]),
        "pid": categorical(spans.pid, columns.pids),
        "tid": categorical(spans.tid, columns.tids),
        "name": categorical(spans.name, columns.names),
        "cat": categorical(spans.cat, columns.cats),
        "category": categorical(spans.cat, category_of),
    }
    step = step_of_spans(spans.start, end, spans.is_step, spans.step_number, spans.gpu, link)
    return {"link": link, "step": step, "texts": texts}


class _Here:
    """An executor that runs what it is given at once, on this thread (a small table)."""

    def __enter__(self) -> _Here:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done
