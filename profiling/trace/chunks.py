"""One piece of a trace's `traceEvents` array → compact columns: the streaming reader's decoder.

A piece (`[ev, ev, ...]`, ~8 MiB, from profiling.trace.stream) is decoded by msgspec into the
slotted structs of profiling.trace.events, and its complete events become numpy columns at
once: times as floats, names and cats as codes into the piece's own small list of values
(profiling.trace.read merges them), ids as int64. Only GPU work keeps its args (kernel table,
hover), and CPU ops recorded with shapes keep those shapes alone, one object per distinct shape
(a trace's millions of shaped ops share a few dozen): the structs are dropped with the piece,
so memory holds columns, not events.

Runs in the reader's process and in its helper process (profiling.trace.read), so it imports
neither pandas nor torch on the common path (a spawned helper starts in ~0.2 s).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any

import msgspec
import numpy as np

from profiling.trace.events import (
    _EVENTS,
    _LOOSE,
    GPU_CATS,
    LANE_NAMES,
    LAUNCH_CATS,
    EventArgs,
    TraceError,
    _lenient,
    _tidy,
    raw_field,
    span_args,
    valid_id,
)

_ANY = msgspec.json.Decoder()
_ENCODE = msgspec.json.Encoder().encode
SHAPE_KEYS = ("Input Dims", "Input type", "Concrete Inputs")
_PACKED_ARGS = msgspec.json.Decoder(list[EventArgs])  # JSON: their Raw fields are JSON
_PACKED_ANY = msgspec.json.Decoder(list[Any])
_PH, _CAT, _NAME, _PID, _TID, _TS, _DUR, _ARGS = (
    attrgetter(name) for name in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
)
_CORRELATION, _EXTERNAL = attrgetter("correlation"), attrgetter("external_id")
_RAWS = tuple(attrgetter(name) for name in ("dims_raw", "types_raw", "concrete_raw"))


@dataclass
class ChunkColumns:
    """A piece's events as columns: its complete events kept (a usable ts and dur) in order."""

    n_events: int
    n_flows: int  # `ph: s` flow starts
    n_complete: int  # `ph: X` events, usable or not
    lane_events: list[Any]  # `ph: M` thread_name / process_labels events, as decoded
    skipped: int  # complete events without a usable ts/dur (the profiler's own bar not counted)
    ts: np.ndarray  # absolute µs
    dur: np.ndarray
    cat_codes: np.ndarray  # into cat_values (the `cat` strings as written; None: missing)
    cat_values: list[Any]
    name_codes: np.ndarray
    name_values: list[Any]
    pid: np.ndarray  # int64 when every pid is an int, else objects as decoded
    tid: np.ndarray
    correlation: np.ndarray  # -1: none (read for GPU work and launches only)
    external: np.ndarray
    gpu_rows: np.ndarray  # rows of GPU work, whose args are kept
    gpu_args: Any  # their args (EventArgs or dicts); packed as JSON bytes between processes
    shaped_rows: np.ndarray  # rows of CPU ops with recorded shapes
    shape_codes: np.ndarray  # per shaped row, into shape_values
    shape_values: Any  # distinct shapes: EventArgs (or dicts) with only the shape fields
    shape_keys: list[Any]  # their content as JSON (profiling.trace.columns merges by it)
    packed: bool = False

    def pack(self) -> ChunkColumns:
        """Ready to cross a process boundary: args as JSON blobs (pickling structs one by one
        costs ~10× more)."""
        self.gpu_args, self.shape_values = _packed(self.gpu_args), _packed(self.shape_values)
        self.packed = True
        return self

    def unpack(self) -> ChunkColumns:
        if self.packed:
            self.gpu_args = _unpacked(self.gpu_args)
            self.shape_values = _unpacked(self.shape_values)
            self.packed = False
        return self


def _packed(args: list[Any]) -> tuple[bool, bytes]:
    return set(map(type, args)) <= {EventArgs}, msgspec.json.encode(args)


def _unpacked(packed: tuple[bool, bytes]) -> list[Any]:
    typed, blob = packed
    return detached((_PACKED_ARGS if typed else _PACKED_ANY).decode(blob))


def detached(args: list[Any]) -> list[Any]:
    """Kept args holding no view of the bytes they were decoded from (see EventArgs)."""
    typed = [a for a in args if type(a) is EventArgs]
    if not any(any(map(len, map(raw, typed))) for raw in _RAWS):
        return args
    return [a.detached() if type(a) is EventArgs else a for a in args]


def decode_piece(piece: bytes, pack: bool = False) -> ChunkColumns:
    """A piece's columns; raises msgspec.DecodeError when it is not valid JSON (a bad cut, or
    a broken file), TraceError when it is JSON but not a list of events."""
    try:
        events: list[Any] = _EVENTS.decode(piece)
    except msgspec.ValidationError:  # an odd field type: the same fields, untyped, tidied
        try:
            events = _tidy(_LOOSE.decode(piece))
        except msgspec.ValidationError:  # entries that are not objects
            events = _lenient(_ANY.decode(piece))
    chunk = _columns(events)
    return chunk.pack() if pack else chunk


def _columns(events: list[Any]) -> ChunkColumns:
    ph = list(map(_PH, events))
    complete = list(compress(events, map("X".__eq__, ph)))
    lane_events = [e for e in compress(events, map("M".__eq__, ph)) if e.name in LANE_NAMES]
    n_complete = len(complete)
    ts, dur = _floats(complete, _TS), _floats(complete, _DUR)
    cat_codes, cat_values = _intern(list(map(_CAT, complete)))
    usable, skipped = usable_rows(ts, dur, cat_codes, cat_values)
    if not usable.all():
        complete = list(compress(complete, usable))
        ts, dur, cat_codes = ts[usable], dur[usable], cat_codes[usable]
    name_codes, name_values = _intern(list(map(_NAME, complete)))
    gpu, launch = work_kinds(cat_codes, cat_values)
    correlation, external, gpu_args = _ids(complete, gpu, gpu | launch)
    shaped = _shaped(complete, ~(gpu | launch))  # the trace model keeps them if asked
    shape_codes, shape_values, shape_keys = _shapes([complete[i].args for i in shaped.tolist()])
    return ChunkColumns(
        n_events=len(events),
        n_flows=ph.count("s"),
        n_complete=n_complete,
        lane_events=lane_events,
        skipped=skipped,
        ts=ts,
        dur=dur,
        cat_codes=cat_codes,
        cat_values=cat_values,
        name_codes=name_codes,
        name_values=name_values,
        pid=_id_column(complete, _PID),
        tid=_id_column(complete, _TID),
        correlation=correlation,
        external=external,
        gpu_rows=np.flatnonzero(gpu),
        gpu_args=gpu_args,
        shaped_rows=shaped,
        shape_codes=shape_codes,
        shape_values=shape_values,
        shape_keys=shape_keys,
    )


def usable_rows(
    ts: np.ndarray, dur: np.ndarray, cat_codes: np.ndarray, cat_values: list[Any]
) -> tuple[np.ndarray, int]:
    """Which complete events become rows (a numeric ts and dur ≥ 0, not the profiler's own
    bar), and how many were skipped (the bar not counted): both readers' rule."""
    profiler_bar = np.array([c == "Trace" for c in cat_values], dtype=bool)[cat_codes]
    usable = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & ~profiler_bar
    return usable, int((~usable).sum()) - int(profiler_bar.sum())


def work_kinds(cat_codes: np.ndarray, cat_values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per row, whether it is GPU work and whether it is a launch, from its `cat`."""
    lowered = [str(c).lower() if c is not None else "" for c in cat_values]
    gpu = np.array([c in GPU_CATS for c in lowered], dtype=bool)[cat_codes]
    launch = np.array([c in LAUNCH_CATS for c in lowered], dtype=bool)[cat_codes]
    return gpu, launch


def _shapes(found: list[Any]) -> tuple[np.ndarray, list[Any], list[Any]]:
    """Shaped ops' args → a code per op into their distinct shapes (only the fields the roles
    and roofline read: "Input Dims", "Input type", "Concrete Inputs"), and each one's key: the
    shapes' JSON bytes as written (torch writes equal shapes alike), never decoded per op."""
    if set(map(type, found)) <= {EventArgs}:
        keys: list[Any] = list(zip(*(map(bytes, map(raw, found)) for raw in _RAWS), strict=True))
        codes, distinct = _intern(keys)
        values = [shape_args(*key) for key in distinct]
        return codes.astype(np.int64), values, distinct
    shapes = [[span_args(args).get(key) for key in SHAPE_KEYS] for args in found]
    codes, distinct = _intern(list(map(_ENCODE, shapes)))
    values = [_shape_dict(_ANY.decode(key)) for key in distinct]  # a few, read back once
    return codes.astype(np.int64), values, distinct


def shape_args(dims: bytes, types: bytes, concrete: bytes) -> EventArgs:
    return EventArgs(
        dims_raw=raw_field(dims), types_raw=raw_field(types), concrete_raw=raw_field(concrete)
    )


def _shape_dict(shape: list[Any]) -> dict[str, Any]:
    return {key: value for key, value in zip(SHAPE_KEYS, shape, strict=True) if value is not None}


def _intern(values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes in order of first appearance, without a Python-level loop: a defaultdict whose
    factory is its own length numbers each new value as it is first looked up."""
    seen: defaultdict[Any, int] = defaultdict()
    seen.default_factory = seen.__len__
    codes = np.fromiter(map(seen.__getitem__, values), dtype=np.int32, count=len(values))
    return codes, list(seen)


def _floats(events: list[Any], field: attrgetter) -> np.ndarray:
    try:
        return np.fromiter(map(field, events), dtype=float, count=len(events))
    except (TypeError, ValueError, OverflowError):  # None, text or an int past float: NaN
        return np.array([_number(v) for v in map(field, events)], dtype=float)


def _number(value: Any) -> float:
    """A value as pandas' to_numeric(errors="coerce") reads it (the whole-file reader's rule)."""
    if isinstance(value, bool) or value is None:
        return float(value) if isinstance(value, bool) else float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _id_column(events: list[Any], field: attrgetter) -> np.ndarray:
    """pids or tids: int64 when all are ints (torch's case), else the values as decoded."""
    values = list(map(field, events))
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        column = np.empty(len(values), dtype=object)
        column[:] = values
        return column


def _ids(
    complete: list[Any], gpu: np.ndarray, needs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Correlation and External id of GPU work and launches (-1: none), and GPU work's args."""
    correlation = np.full(len(complete), -1, dtype=np.int64)
    external = np.full(len(complete), -1, dtype=np.int64)
    wanted = np.flatnonzero(needs)
    found = list(map(_ARGS, compress(complete, needs)))
    if set(map(type, found)) <= {EventArgs}:
        correlation[wanted] = _int_column(list(map(_CORRELATION, found)))
        external[wanted] = _int_column(list(map(_EXTERNAL, found)))
    else:
        found = [span_args(a) for a in found]
        correlation[wanted] = _int_column([a.get("correlation") for a in found])
        external[wanted] = _int_column([a.get("External id") for a in found])
    return correlation, external, detached(list(compress(found, gpu[wanted])))


def _shaped(complete: list[Any], cpu: np.ndarray) -> np.ndarray:
    """Rows of CPU ops whose args carry "Input Dims" (a trace recorded with record_shapes)."""
    rows = np.flatnonzero(cpu)
    found = list(map(_ARGS, compress(complete, cpu)))
    if set(map(type, found)) <= {EventArgs}:
        recorded = np.fromiter(map(EventArgs.has_shapes, found), dtype=bool, count=len(found))
    else:
        dims = (span_args(a).get("Input Dims") for a in found)
        recorded = np.fromiter(map(is_not, dims, repeat(None)), dtype=bool, count=len(found))
    return rows[recorded]


def _int_column(values: list[Any]) -> np.ndarray:
    """valid_id of each value, vectorised when they are all ints or None (torch's case)."""
    if set(map(type, values)) <= {int, type(None)}:
        column = np.array(values, dtype=object)
        column[column == None] = -1  # noqa: E711 - elementwise
        try:
            return column.astype(np.int64)
        except OverflowError:
            pass
    return np.fromiter(map(valid_id, values), dtype=np.int64, count=len(values))


def check_events(chunks: list[ChunkColumns]) -> None:
    """The whole-file reader's refusals, decided over every piece."""
    if not sum(c.n_complete for c in chunks):
        raise TraceError(
            "the trace holds no complete (`ph: X`) events: nothing ran while it recorded"
        )
    if not sum(len(c.ts) for c in chunks):
        if not sum(c.skipped for c in chunks):
            raise TraceError(
                "nothing was recorded: the trace holds only the profiler's own span (with a "
                "schedule, export after an active step, e.g. from on_trace_ready)"
            )
        raise TraceError("no complete event has a numeric `ts` and `dur`")
