"""The whole-file reader as it stood before the streaming one (issue #24), kept as the oracle.

tests/trace/test_trace_stream.py holds the streaming reader's table equal to what this builds: the
whole JSON decoded at once into structs, then columns pulled from them. Only the events →
columns half is kept here; the spans table is built from those columns by the same code.
Frozen on purpose: do not improve it.
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from profiling.trace import memory as trace_memory
from profiling.trace import model as trace_model
from profiling.trace.columns import EventColumns, _factorize
from profiling.trace.events import (
    _ARGS,
    _DOC,
    _EVENTS,
    _LOOSE,
    EventArgs,
    TraceError,
    _lenient,
    _tidy,
    lane_metadata,
    read_bytes,
    span_args,
    valid_id,
)
from profiling.trace.read import ReadEvents


def load(source: str | Path | bytes, max_bytes: int = 2 * 1024**3) -> trace_model.Trace:
    data = read_bytes(source, max_bytes)
    with trace_memory.collector_paused():
        try:
            events, meta = decode_events(data)
            ph = np.array(list(map(attrgetter("ph"), events)), dtype=object)
            names_meta = lane_metadata(list(compress(events, ph == "M")))
            complete = list(compress(events, ph == "X"))
            if not complete:
                raise TraceError(
                    "the trace holds no complete (`ph: X`) events: nothing ran while it recorded"
                )
            read = ReadEvents(
                columns=event_columns(complete, bool(meta.get("record_shapes"))),
                lane_names=names_meta,
                meta=meta,
                n_events=len(events),
                n_flows=int((ph == "s").sum()),
            )
            return trace_model._build(read)
        except RecursionError:
            raise TraceError("not valid JSON (nested too deeply)") from None


def decode_events(data: bytes) -> tuple[list[Any], dict[str, Any]]:
    top = _top_level(data)
    try:
        events: list[Any] = _EVENTS.decode(top["traceEvents"])
    except msgspec.ValidationError:
        try:
            events = _tidy(_LOOSE.decode(top["traceEvents"]))
        except msgspec.ValidationError:
            events = _lenient(_ARGS.decode(top["traceEvents"]))
        except msgspec.DecodeError as exc:
            raise TraceError(f"not valid JSON ({exc})") from None
    except msgspec.DecodeError as exc:
        raise TraceError(f"not valid JSON ({exc})") from None
    meta: dict[str, Any] = {}
    for key, raw in top.items():
        if key != "traceEvents":
            try:
                meta[key] = _ARGS.decode(raw)
            except msgspec.DecodeError:
                continue
    return events, meta


def _top_level(data: bytes) -> dict[str, msgspec.Raw]:
    try:
        if data.lstrip()[:1] == b"[":
            top: dict[str, msgspec.Raw] = {"traceEvents": msgspec.Raw(data)}
        else:
            top = _DOC.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceError(f"not valid JSON ({exc})") from None
    if "traceEvents" not in top:
        raise TraceError("JSON is not a Chrome trace: no `traceEvents` list")
    return top


def _factorize_list(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    seen: dict[Any, int] = {}
    add = seen.setdefault
    codes = np.fromiter((add(v, len(seen)) for v in values), dtype=np.int64, count=len(values))
    uniques = list(seen)
    if None in seen:
        at = seen[None]
        codes = np.where(codes == at, len(uniques) - 1, codes - (codes > at))
        uniques.remove(None)
        uniques.append(None)
    return codes, np.array(uniques, dtype=object)


def _factorize_ids(values: list[Any], keep: np.ndarray | None) -> tuple[np.ndarray, Any]:
    try:
        ints = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        objects = np.array(values, dtype=object)
        return _factorize(objects if keep is None else objects[keep])
    uniques, codes = np.unique(ints if keep is None else ints[keep], return_inverse=True)
    return codes.astype(np.int64), uniques.astype(object)


_COLUMNS = [attrgetter(name) for name in ("cat", "name", "pid", "tid", "ts", "dur")]


def _floats(values: Any) -> np.ndarray:
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype="object"), errors="coerce").to_numpy(float)


def event_columns(complete: list[Any], shapes: bool = False) -> EventColumns:
    cat_col, name_col, pid_col, tid_col, ts_col, dur_col = (
        list(map(get, complete)) for get in _COLUMNS
    )
    ts, dur = _floats(ts_col), _floats(dur_col)
    cat_codes, cat_values = _factorize_list(cat_col)
    usable, skipped = _usable(ts, dur, cat_codes, cat_values)
    keep = np.flatnonzero(usable)
    full = len(keep) == len(complete)
    name_codes, name_values = _factorize_list(
        name_col if full else list(compress(name_col, usable))
    )
    pid_codes, pid_values = _factorize_ids(pid_col, None if full else keep)
    tid_codes, tid_values = _factorize_ids(tid_col, None if full else keep)
    events = complete if full else list(compress(complete, usable))
    cats = np.array([str(c).lower() if c is not None else "" for c in cat_values], dtype=object)
    cat_codes = cat_codes[keep]
    gpu = np.isin(cats, list(trace_model.GPU_CATS))[cat_codes]
    launch = np.isin(cats, list(trace_model.LAUNCH_CATS))[cat_codes]
    args, correlation, external = args_columns(events, gpu, gpu | launch, shapes)
    column = np.empty(len(args), dtype=object)
    column[:] = args
    return EventColumns(
        ts=ts[keep],
        dur=dur[keep],
        cat_codes=cat_codes,
        cats=cats,
        name_codes=name_codes,
        names=_texts(name_values),
        pid_codes=pid_codes,
        pids=_texts(pid_values),
        tid_codes=tid_codes,
        tids=_texts(tid_values),
        correlation=correlation,
        external=external,
        args=column,
        skipped=skipped,
    )


def _usable(ts, dur, cat_codes, cat_values) -> tuple[np.ndarray, int]:
    profiler_bar = (cat_values == "Trace")[cat_codes]
    usable = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & ~profiler_bar
    skipped = int((~usable).sum()) - int(profiler_bar.sum())
    if not usable.any():
        if not skipped:
            raise TraceError(
                "nothing was recorded: the trace holds only the profiler's own span (with a "
                "schedule, export after an active step, e.g. from on_trace_ready)"
            )
        raise TraceError("no complete event has a numeric `ts` and `dur`")
    return usable, skipped


def _texts(values: np.ndarray) -> np.ndarray:
    return np.array([str(v) if v is not None else "" for v in values], dtype=object)


def args_columns(events, gpu, needs_args, shapes=False) -> tuple[list[Any], np.ndarray, np.ndarray]:
    args: list[Any] = [{}] * len(events)
    correlation = np.full(len(events), -1, dtype=np.int64)
    external = np.full(len(events), -1, dtype=np.int64)
    wanted = np.flatnonzero(needs_args)
    found = [e.args for e in compress(events, needs_args)]
    if all(type(a) is EventArgs for a in found):
        correlation[wanted] = _int_column([a.correlation for a in found])
        external[wanted] = _int_column([a.external_id for a in found])
    else:
        found = [span_args(a) for a in found]
        correlation[wanted] = _int_column([a.get("correlation") for a in found])
        external[wanted] = _int_column([a.get("External id") for a in found])
    for i, a, g in zip(wanted, found, gpu[wanted], strict=True):
        if g:
            args[i] = a
    if shapes:  # main's rule (roles and roofline): CPU ops with recorded shapes keep their args
        for i in np.flatnonzero(~needs_args).tolist():
            if span_args(events[i].args).get("Input Dims") is not None:
                args[i] = events[i].args
    return args, correlation, external


def _int_column(values: list[Any]) -> np.ndarray:
    return np.fromiter(map(valid_id, values), dtype=np.int64, count=len(values))
