"""The trace model: any torch.profiler Chrome trace → one tidy table of spans.

Every view (kernel table, Gantt, per-forward summary, diff, analyse) reads this table and never
the raw JSON again, as HTA keeps parsing apart from its analyses. We parse ourselves instead of
using HTA because we need one small table per trace that also works on a user's upload, and a
million-event trace has to load in seconds: msgspec decodes events into slotted structs and
leaves each `args` as raw JSON until a row needs it (only GPU work and its launches do), names
are interned once (HTA's symbol-table idea), and depth, overlap, parents and links are numpy
over sorted arrays per lane instead of a per-event stack.
"""

from __future__ import annotations

import gc
import gzip
import io
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

# torch.profiler's `cat` values (lower-cased), newer names first, older Kineto names after.
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
# Our coarse category per span, used for colour and for the tables.
CATEGORY = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu annotation",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "cpu_op": "cpu op",
    "operator": "cpu op",
    "user_annotation": "annotation",
    "python_function": "python",
}
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_INT64 = 2**63  # ids and step numbers past int64 count as absent
_ID_DIGITS = 18  # digits any int64 step number fits in (checked before int(): no huge parse)

DEFAULT_MAX_BYTES = 2 * 1024**3  # expanded JSON; the app passes its own, smaller limits


class TraceError(ValueError):
    """The input is not a readable Chrome trace; the message says what is wrong."""


class TraceTooBig(TraceError):
    """The trace is over a size limit (callers with a way to raise it can say so)."""


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
    def has_gpu(self) -> bool:
        return bool(is_in(self.spans["kind"], "gpu").any())

    def steps(self) -> pd.DataFrame:
        """ProfilerStep spans (the active steps of a scheduled run), in order."""
        return self.spans.iloc[step_rows(self.spans)]


def step_number(name: Any) -> int:
    """N of a `ProfilerStep#N` name, else -1: the one test for "this span is a step" (time
    zero, each span's step, the step windows and the Gantt's step lines all use it)."""
    return _step_number(name) if isinstance(name, str) else -1


@lru_cache(maxsize=65536)
def _step_number(name: str) -> int:  # a run's names repeat run after run: matched once each
    m = _STEP.match(name)
    return int(m.group(1)) if m and len(m.group(1)) <= _ID_DIGITS else -1


def step_rows(spans: pd.DataFrame) -> np.ndarray:
    """Positions of the ProfilerStep spans: CPU spans with a step's name, whatever their `cat`
    (torch writes `user_annotation` today; older versions wrote `cpu_op`)."""
    named = per_value(spans["name"], step_number, -1).astype(np.int64) >= 0
    return np.flatnonzero(is_in(spans["kind"], "cpu") & named)


def operator_rows(spans: pd.DataFrame, annotations: bool = False) -> np.ndarray:
    """Positions of the CPU operator spans (`cpu_op`), and with `annotations` the
    record_function spans too (DataLoader's `__next__`, `Optimizer.step`, ProfilerSteps): the
    CPU side of what key_averages tables."""
    wanted = ("cpu op", "annotation") if annotations else ("cpu op",)
    return np.flatnonzero(is_in(spans["kind"], "cpu") & is_in(spans["category"], *wanted))


def own_calls(spans: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows`, whether it is a call of its own. An op that redispatches to itself
    records a span of the same name as the only child of its span (`aten::div_` inside
    `aten::div_`); key_averages merges the two into one call (EventList._remove_dup_nodes),
    so a table that counted both would show twice the calls and total time."""
    parent_all = spans["parent"].to_numpy()
    parent = parent_all[rows]
    has = parent >= 0
    children = np.bincount(parent_all[parent_all >= 0], minlength=len(spans))
    names = spans["name"]
    codes = names.array.codes if isinstance(names.dtype, pd.CategoricalDtype) else names.to_numpy()
    up = np.where(has, parent, 0)
    merged = has & (codes[rows] == codes[up]) & (children[up] == 1)
    return ~merged


def per_value(column: pd.Series, fn: Callable[[Any], Any], missing: Any) -> np.ndarray:
    """`fn` of every row's value, called once per distinct value of a categorical (a trace's
    names repeat thousands of times); a missing value (code -1) gives `missing`."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        values = [fn(c) for c in column.cat.categories]
        return np.array([*values, missing], dtype=object)[column.array.codes]
    return np.array([fn(v) for v in column.to_numpy()] + [missing], dtype=object)[:-1]


def is_in(column: pd.Series, *values: Any) -> np.ndarray:
    """Rows whose value is one of `values`, compared on a categorical's codes: a filter on a
    spans table costs one integer pass, not a string compare per row (or pandas' overhead)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        wanted = set(values)
        hits = [i for i, c in enumerate(column.cat.categories) if c in wanted]
        codes = column.array.codes
        if len(hits) == 1:
            return codes == hits[0]
        return np.isin(codes, hits)
    return column.isin(values).to_numpy(dtype=bool)


def read_bytes(source: str | Path | bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Raw JSON bytes of a plain or gzip trace, refusing more than `max_bytes` once expanded.

    Read in 8 MiB chunks and refused as soon as the running total passes the limit, so a gzip
    bomb costs at most `max_bytes` of memory and the time to expand that much, never more.
    """
    if isinstance(source, bytes):
        fh: io.BufferedIOBase = io.BytesIO(source)
    else:
        try:
            fh = open(source, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise TraceError(f"cannot open trace: {exc.strerror}") from None
    chunks: list[bytes] = []
    total = 0
    with fh:
        magic = fh.read(2)
        fh.seek(0)
        if magic != b"\x1f\x8b":  # plain JSON: its size is known, one read is enough
            size = fh.seek(0, io.SEEK_END)
            fh.seek(0)
            if size > max_bytes:
                raise _too_big(max_bytes)
            return fh.read()
        stream = gzip.GzipFile(fileobj=fh)
        try:
            while chunk := stream.read(_CHUNK):
                total += len(chunk)
                if total > max_bytes:
                    chunks.clear()
                    raise _too_big(max_bytes)
                chunks.append(chunk)
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
            raise TraceError(f"the gzip stream is corrupt ({exc})") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_CHUNK = 8 * 1024**2


def _too_big(max_bytes: int) -> TraceError:
    return TraceTooBig(
        f"the trace expands to more than {max_bytes / 1024**2:.0f} MiB of JSON; "
        "profile fewer steps or trim it"
    )


class _Args(msgspec.Struct, gc=False, frozen=True):
    """The args fields any view reads, decoded with the event in one pass (other keys are
    skipped by the decoder): cheaper than raw JSON plus a second decode, far cheaper than a
    dict per event."""

    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    stream: Any = None
    device: Any = None
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=None, name="warps per SM")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Any = None
    bandwidth: Any = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    labels: Any = None  # ph: M process_labels
    name: Any = None  # ph: M thread_name / process_name


_ARG_KEYS = [(f.name, f.encode_name) for f in msgspec.structs.fields(_Args)]
_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):  # gc=False: no cycles, skip tracking 10⁶ objects
    """One trace event as torch writes it; `args` stays raw JSON until a row needs it."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = ""
    tid: int | str = ""
    ts: float | None = None
    dur: float | None = None
    args: _Args = _NO_ARGS


class _LooseEvent(msgspec.Struct, gc=False):
    """The same fields for traces that break the typed schema (a numeric name, a string ts)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Any = None


_DOC = msgspec.json.Decoder(dict[str, msgspec.Raw])
_EVENTS = msgspec.json.Decoder(list[_Event])  # typed: about twice as fast as Any fields
_LOOSE = msgspec.json.Decoder(list[_LooseEvent])
_ARGS = msgspec.json.Decoder()


def load(source: str | Path | bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> Trace:
    """Parse a Chrome trace file (or its bytes), plain or gzip."""
    data = read_bytes(source, max_bytes)
    with _collector_paused():
        return _parse(data)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsing allocates ~10⁶ tuples and ids, none in cycles; the cyclic collector's passes
    over them cost ~1 s per 10⁶ events, so it is paused (and restored) for the parse."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _parse(data: bytes) -> Trace:
    try:
        return _decode(data)
    except RecursionError:  # msgspec's answer to JSON nested thousands of levels deep
        raise TraceError("not valid JSON (nested too deeply)") from None


def _decode(data: bytes) -> Trace:
    try:
        if data.lstrip()[:1] == b"[":  # the Chrome format also allows a bare array of events
            top: dict[str, msgspec.Raw] = {"traceEvents": msgspec.Raw(data)}
        else:
            top = _DOC.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceError(f"not valid JSON ({exc})") from None
    if "traceEvents" not in top:
        raise TraceError("JSON is not a Chrome trace: no `traceEvents` list")
    events: list[Any]
    try:
        events = _EVENTS.decode(top["traceEvents"])
    except msgspec.ValidationError:  # an odd field type: same fields, no types
        try:
            events = _tidy(_LOOSE.decode(top["traceEvents"]))
        except msgspec.ValidationError:  # entries that are not objects: the slowest path
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
    return _build(events, meta)


def typed_events(data: bytes) -> list[Any]:
    """The events of a trace whose every field has the type torch writes (profiling.small_trace
    reads only such traces); raises msgspec's errors, or KeyError without `traceEvents`."""
    return _EVENTS.decode(_DOC.decode(data)["traceEvents"])


def _lenient(items: Any) -> list[_LooseEvent]:
    if not isinstance(items, list):
        raise TraceError("JSON is not a Chrome trace: no `traceEvents` list")
    fields = [f for f in _LooseEvent.__struct_fields__ if f != "args"]
    return _tidy(
        [
            _LooseEvent(**{k: e.get(k) for k in fields}, args=e.get("args"))
            for e in items
            if type(e) is dict
        ]
    )


def _tidy(events: list[_LooseEvent]) -> list[_LooseEvent]:
    """Untyped events made safe to tabulate: text fields that are not text (a list, a number)
    become their JSON-ish str, pids/tids that are neither int nor str likewise; `None` stays."""
    for e in events:
        for key in ("ph", "cat", "name"):
            value = getattr(e, key)
            if value is not None and type(value) is not str:
                setattr(e, key, str(value))
        for key in ("pid", "tid"):
            value = getattr(e, key)
            if value is not None and type(value) not in (int, str):
                setattr(e, key, str(value))
    return events


def span_args(value: Any) -> dict[str, Any]:
    """The `args` of one span as a dict keyed as in the trace (`registers per thread`, ...)."""
    if isinstance(value, _Args):
        return {key: v for attr, key in _ARG_KEYS if (v := getattr(value, attr)) is not None}
    return value if type(value) is dict else {}


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize with missing values as one more code. (Its `use_na_sentinel=False` does
    the same but scans every string for NA first: 0.15 s per 10⁶ names.)"""
    codes, uniques = pd.factorize(values)
    missing = codes < 0
    if missing.any():
        uniques = np.append(np.asarray(uniques, dtype=object), None)
        codes[missing] = len(uniques) - 1
    return codes, np.asarray(uniques, dtype=object)


def _factorize_list(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """`_factorize` of a list of names or cats (str, or None when missing), through a dict:
    ~3× faster than pandas' hash table on 10⁶ Python strings, which it first scans to decide
    on its string dtype. The same codes: first appearance order, a missing value last."""
    seen: dict[Any, int] = {}
    add = seen.setdefault
    codes = np.fromiter((add(v, len(seen)) for v in values), dtype=np.int64, count=len(values))
    uniques = list(seen)
    if None in seen:  # pandas counts it missing: its code goes after every value's
        at = seen[None]
        codes = np.where(codes == at, len(uniques) - 1, codes - (codes > at))
        uniques.remove(None)
        uniques.append(None)
    return codes, np.array(uniques, dtype=object)


def _factorize_ids(values: list[Any], keep: np.ndarray | None) -> tuple[np.ndarray, Any]:
    """pid/tid codes: integers factorised as a numpy int array (fast), else as objects."""
    try:
        ints = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        objects = np.array(values, dtype=object)
        return _factorize(objects if keep is None else objects[keep])
    uniques, codes = np.unique(ints if keep is None else ints[keep], return_inverse=True)
    return codes.astype(np.int64), uniques.astype(object)


_PH = attrgetter("ph")
_COLUMNS = [attrgetter(name) for name in ("cat", "name", "pid", "tid", "ts", "dur")]


def _floats(values: Any) -> np.ndarray:
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError):  # a string or None somewhere: coerce, NaN marks it
        return pd.to_numeric(pd.Series(values, dtype="object"), errors="coerce").to_numpy(float)


def _build(events: list[Any], meta: dict[str, Any]) -> Trace:
    n_events = len(events)
    ph = np.array(list(map(_PH, events)), dtype=object)
    n_flows = int((ph == "s").sum())
    names_meta = lane_metadata(list(compress(events, ph == "M")))
    x = list(compress(events, ph == "X"))
    if not x:
        raise TraceError(
            "the trace holds no complete (`ph: X`) events: nothing ran while it recorded"
        )
    # One C-level pass per column (rows of tuples transposed with zip(*) took twice as long).
    cat_col, name_col, pid_col, tid_col, ts_col, dur_col = (list(map(get, x)) for get in _COLUMNS)
    ts, dur = _floats(ts_col), _floats(dur_col)
    cat_codes, cat_values = _factorize_list(cat_col)
    usable = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0)
    usable &= (cat_values != "Trace")[cat_codes]  # the profiler's own "PyTorch Profiler (0)" bar
    skipped = int((~usable).sum()) - int((cat_values == "Trace")[cat_codes].sum())
    keep = np.flatnonzero(usable)
    if not len(keep):
        if not skipped:  # only the profiler's own bar: a schedule that never reached `active`
            raise TraceError(
                "nothing was recorded: the trace holds only the profiler's own span (with a "
                "schedule, export after an active step, e.g. from on_trace_ready)"
            )
        raise TraceError("no complete event has a numeric `ts` and `dur`")
    full = len(keep) == len(x)
    complete = x if full else list(compress(x, usable))
    ts, dur, cat_codes = ts[keep], dur[keep], cat_codes[keep]

    # Interned columns, as HTA's symbol table does: few distinct values, one code per row.
    cats = np.array([str(c).lower() if c is not None else "" for c in cat_values], dtype=object)
    cat = cats[cat_codes]
    kept_names = name_col if full else list(compress(name_col, usable))
    name_codes, name_values = _factorize_list(kept_names)
    names = np.array([str(n) if n is not None else "" for n in name_values], dtype=object)
    pid_codes, pid_values = _factorize_ids(pid_col, None if full else keep)
    tid_codes, tid_values = _factorize_ids(tid_col, None if full else keep)
    pids = np.array([str(p) if p is not None else "" for p in pid_values], dtype=object)
    tids = np.array([str(t) if t is not None else "" for t in tid_values], dtype=object)

    gpu = np.isin(cats, list(GPU_CATS))[cat_codes]
    is_launch_cat = np.isin(cats, list(LAUNCH_CATS))
    needs_args = gpu | is_launch_cat[cat_codes]
    # args: GPU work keeps its decoded fields (kernel table, hover; read with span_args),
    # launches give up their two ids, CPU ops keep nothing.
    args: list[Any] = [{}] * len(complete)  # one shared empty dict for the rest
    correlation = np.full(len(complete), -1, dtype=np.int64)
    external = np.full(len(complete), -1, dtype=np.int64)
    wanted = np.flatnonzero(needs_args)
    found = [e.args for e in compress(complete, needs_args)]
    if all(type(a) is _Args for a in found):  # the typed path: plain attribute reads
        correlation[wanted] = _int_column([a.correlation for a in found])
        external[wanted] = _int_column([a.external_id for a in found])
    else:
        found = [span_args(a) for a in found]
        correlation[wanted] = _int_column([a.get("correlation") for a in found])
        external[wanted] = _int_column([a.get("External id") for a in found])
    for i, a, g in zip(wanted, found, gpu[wanted], strict=True):
        if g:
            args[i] = a  # an _Args struct (or a dict): read it with span_args

    # ProfilerStep number per distinct name (-1: not a step), matched once per name
    step_of_name = np.array([step_number(n) for n in names], dtype=np.int64)
    steps = (step_of_name[name_codes] >= 0) & ~gpu
    t0 = float(ts[steps].min()) if steps.any() else float(ts.min())
    start = ts - t0

    is_ann = cat == "gpu_user_annotation"
    lane_code, lanes = _lanes(gpu, pid_codes, tid_codes, is_ann, pids, tids, names_meta)
    o = np.lexsort((-dur, start, lane_code))
    category_of = np.array([CATEGORY.get(c, c or "other") for c in cats], dtype=object)

    # Every derived column is computed on plain arrays in display order and the frame is built
    # once at the end: a run's trace holds a few hundred spans, where each pandas operation
    # costs more than the numpy work itself (this build was ~20 ms of a 70 ms app run).
    lane, start, dur, gpu, steps = lane_code[o], start[o], dur[o], gpu[o], steps[o]
    end = start + dur
    depth, overlap = _depth_and_overlap(lane, start, end)
    parent = _parents(depth, lane)
    _renest_crossings(lane, start, end, depth, parent, overlap)
    correlation, external = correlation[o], external[o]
    launch = is_launch_cat[cat_codes[o]]
    link = _links(correlation, gpu & ~is_ann[o], launch)
    step = _steps(start, end, steps, step_of_name[name_codes[o]], gpu, link)
    df = pd.DataFrame(
        {
            "lane": _from_codes(lane, lanes, ordered=True),
            "kind": _from_codes(gpu.astype(np.int8), ["cpu", "gpu"]),
            "pid": _categorical(pid_codes[o], pids),
            "tid": _categorical(tid_codes[o], tids),
            "name": _categorical(name_codes[o], names),
            "cat": _categorical(cat_codes[o], cats),
            "category": _categorical(cat_codes[o], category_of),
            "start_us": start,
            "dur_us": dur,
            "end_us": end,
            "depth": depth,
            "parent": parent,
            "self_us": _self_time(dur, parent),
            "overlap": overlap,
            "correlation": correlation,
            "external_id": external,
            "link": link,
            "step": step,
            "args": [args[i] for i in o],
        },
        copy=False,
    )
    return Trace(
        spans=df,
        t0_us=t0,
        meta=meta,
        lanes=lanes,
        n_events=n_events,
        n_flows=n_flows,
        skipped=skipped,
    )


def _from_codes(codes: np.ndarray, categories: Any, ordered: bool = False) -> pd.Categorical:
    """Codes are valid by construction, so pandas' validation pass is skipped."""
    if len(categories) <= _SMALL_VOCABULARY:
        dtype = _dtype(tuple(categories), ordered)
    else:
        dtype = pd.CategoricalDtype(pd.Index(categories, dtype=object), ordered=ordered)
    return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)


_SMALL_VOCABULARY = 1024


@lru_cache(maxsize=256)
def _dtype(categories: tuple[Any, ...], ordered: bool) -> pd.CategoricalDtype:
    """Categorical dtypes of small vocabularies (kinds, cats, lanes, a run's op names), shared:
    making one costs ~55 µs, a run's trace needs seven, and repeated runs see the same ones."""
    return pd.CategoricalDtype(pd.Index(categories, dtype=object), ordered=ordered)


def _categorical(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """Codes into `values`, merging values that only differed before str()/lower()."""
    uniques, remap = np.unique(values.astype(str), return_inverse=True)
    return _from_codes(remap.reshape(-1)[codes], uniques.astype(object))


def valid_id(value: Any) -> int:
    """An id as the table keeps it: ids in traces are ints; anything else, or an int past
    int64, counts as absent (-1)."""
    return value if type(value) is int and -_INT64 <= value < _INT64 else -1


def _int_column(values: list[Any]) -> np.ndarray:
    return np.fromiter(map(valid_id, values), dtype=np.int64, count=len(values))


def lane_metadata(events: list[Any]) -> dict[tuple[str, str], str]:
    """Readable names from `ph: M` events: (pid, "") → process label, (pid, tid) → thread name."""
    names: dict[tuple[str, str], str] = {}
    for e in events:
        if e.name not in ("process_labels", "thread_name"):
            continue  # most are process_name / sort_index: no dict built for them
        a = span_args(e.args)
        pid, tid = str(e.pid if e.pid is not None else ""), str(e.tid if e.tid is not None else "")
        if e.name == "process_labels" and a.get("labels"):
            names[(pid, "")] = str(a["labels"])
        elif e.name == "thread_name" and a.get("name"):
            names[(pid, tid)] = str(a["name"]).strip()
    return names


def _lanes(
    gpu: np.ndarray,
    pid_codes: np.ndarray,
    tid_codes: np.ndarray,
    is_ann: np.ndarray,
    pids: np.ndarray,
    tids: np.ndarray,
    names: dict[tuple[str, str], str],
) -> tuple[np.ndarray, list[str]]:
    """One lane per CPU thread and per GPU stream; GPU annotations get a lane above their stream."""
    key = ((pid_codes.astype(np.int64) * len(tids) + tid_codes) * 2 + gpu) * 2 + is_ann
    uniq, inverse = np.unique(key, return_inverse=True)
    labels: list[str] = []
    order: list[tuple[int, float, float, str]] = []
    for k in uniq:
        ann, rest = k % 2, k // 2
        is_gpu, rest = rest % 2, rest // 2
        pid, tid = str(pids[rest // len(tids)]), str(tids[rest % len(tids)])
        sort, text = lane_label(pid, tid, bool(is_gpu), bool(ann), names)
        labels.append(text)
        order.append((*sort, text))
    lanes = list(dict.fromkeys(text for *_, text in sorted(order)))
    position = {text: i for i, text in enumerate(lanes)}
    lane_code = np.array([position[t] for t in labels], dtype=np.int64)[inverse]
    return lane_code, lanes


def lane_label(
    pid: str, tid: str, gpu: bool, ann: bool, names: dict[tuple[str, str], str]
) -> tuple[tuple[int, float, float], str]:
    """A lane's sort key and label: CPU threads first (by pid, tid), then GPU streams, each
    stream's annotation lane just above it."""
    if gpu:
        text = f"{names.get((pid, ''), f'GPU {pid}')} · stream {tid}"
        return (2, _num(pid), _num(tid) + (0.0 if ann else 0.5)), (
            f"{text} · annotations" if ann else text
        )
    thread = names.get((pid, tid)) or f"thread {tid}"
    text = f"CPU · {thread}" if thread.startswith("thread") else f"CPU · {thread} ({tid})"
    return (1, _num(pid), _num(tid)), text


def _num(x: str) -> float:
    try:
        return float(x)
    except ValueError:
        return float("inf")


EPS_US = 2e-3  # µs floats with ns resolution: a 1–2 ns 'overlap' is rounding


def _depth_and_overlap(
    lane: np.ndarray, starts_all: np.ndarray, ends_all: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Nesting depth = spans still open when this one starts; overlap = crosses an open span's end.

    Rows are sorted by lane, start, longest first. In a properly nested lane the number of spans
    started before i minus those already ended is exactly i's depth. A span that starts inside an
    earlier one but ends after every earlier span has ended is a partial overlap: both are kept
    and both flagged, never dropped.
    """
    n = len(lane)
    depth = np.zeros(n, dtype=np.int64)
    overlap = np.zeros(n, dtype=bool)
    bounds = np.flatnonzero(lane[1:] != lane[:-1]) + 1
    eps = EPS_US
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n], strict=True):
        s, e = starts_all[lo:hi], ends_all[lo:hi]
        ended = np.searchsorted(np.sort(e), s + eps, side="right") - (e <= s + eps)
        depth[lo:hi] = np.maximum(np.arange(hi - lo) - ended, 0)
        if hi - lo > 1:
            prev_max = np.maximum.accumulate(np.r_[-np.inf, e[:-1]])
            crossing = (s < prev_max - eps) & (e > prev_max + eps)
            if crossing.any():
                overlap[lo:hi] |= crossing
                # flag the span whose end was crossed too
                arg = _running_argmax(e)
                crossed = arg[np.flatnonzero(crossing) - 1]
                overlap[lo + crossed] = True
    return depth, overlap


def _parents(depth: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """Row of the enclosing span: the last span one level up that started earlier in the lane."""
    parent = np.full(len(depth), -1, dtype=np.int64)
    order = np.arange(len(depth))
    for d in range(1, int(depth.max()) + 1 if len(depth) else 0):
        child = order[depth == d]
        above = order[depth == d - 1]
        if not len(child) or not len(above):
            continue
        i = np.searchsorted(above, child, side="right") - 1
        ok = i >= 0
        cand = above[np.clip(i, 0, None)]
        ok &= lane[cand] == lane[child]
        parent[child[ok]] = cand[ok]
    return parent


def _renest_crossings(
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    depth: np.ndarray,
    parent: np.ndarray,
    overlap: np.ndarray,
) -> None:
    """Lanes where a span outlives the parent the counting found (a `with_stack` trace: a
    record_function starts inside `_record_function_enter_new` and ends long after it) are
    nested again as torch nests them (EventList's populate_cpu_children): a span's parent is
    the innermost open span that contains it whole, and a crossed span is closed and flagged.
    In place; a per-span loop, but only over the lanes that need it."""
    eps = EPS_US
    crossed = (parent >= 0) & (end > end[np.clip(parent, 0, None)] + eps)
    if not crossed.any():  # properly nested: the counting was right
        return
    bounds = np.flatnonzero(lane[1:] != lane[:-1]) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(lane)], strict=True):
        if not crossed[lo:hi].any():
            continue
        s, e = start[lo:hi].tolist(), end[lo:hi].tolist()
        stack: list[int] = []
        for i in range(hi - lo):
            while stack:
                top = stack[-1]
                if s[i] >= e[top] - eps:  # ended before i starts
                    stack.pop()
                elif e[i] > e[top] + eps:  # i crosses top's end: top cannot hold it
                    overlap[lo + i] = overlap[lo + top] = True
                    stack.pop()
                else:
                    break
            parent[lo + i] = lo + stack[-1] if stack else -1
            depth[lo + i] = len(stack)
            stack.append(i)


def _self_time(dur: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Duration minus the time spent in direct children (what key_averages calls self time)."""
    has = parent >= 0
    children = np.bincount(parent[has], weights=dur[has], minlength=len(dur))
    return np.maximum(dur - children, 0.0)


def _running_argmax(x: np.ndarray) -> np.ndarray:
    running = np.maximum.accumulate(x)
    idx = np.where(x == running, np.arange(len(x)), 0)
    return np.maximum.accumulate(idx)


def _first_rows(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys, sorted, and the first of `rows` carrying each."""
    uniq, first = np.unique(keys, return_index=True)
    return uniq, rows[first]


def _links(corr: np.ndarray, gpu: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Row of the counterpart: GPU work → its runtime launch, launch → its (first) GPU work.

    torch writes the same correlation id into the launch's args, the kernel's args and the
    `ac2g` flow pair between them, so one join on it recovers every arrow Perfetto draws.
    """
    link = np.full(len(corr), -1, dtype=np.int64)
    has = corr >= 0
    g_rows, l_rows = np.flatnonzero(gpu & has), np.flatnonzero(launch & has)
    if not len(g_rows) or not len(l_rows):
        return link
    g_keys, g_first = _first_rows(corr[g_rows], g_rows)
    l_keys, l_first = _first_rows(corr[l_rows], l_rows)
    # every GPU row finds its launch (first launch with that id); every launch its first work
    at = np.clip(np.searchsorted(l_keys, corr[g_rows]), 0, len(l_keys) - 1)
    hit = l_keys[at] == corr[g_rows]
    link[g_rows[hit]] = l_first[at[hit]]
    at = np.clip(np.searchsorted(g_keys, corr[l_rows]), 0, len(g_keys) - 1)
    hit = g_keys[at] == corr[l_rows]
    link[l_rows[hit]] = g_first[at[hit]]
    return link


def _steps(
    start: np.ndarray,
    end: np.ndarray,
    is_step: np.ndarray,
    numbers: np.ndarray,
    gpu: np.ndarray,
    link: np.ndarray,
) -> np.ndarray:
    """ProfilerStep number each span belongs to (GPU work: its launch's step), -1 outside."""
    step = np.full(len(start), -1, dtype=np.int64)
    rows = np.flatnonzero(is_step)
    if not len(rows):
        return step
    rows = rows[np.argsort(start[rows], kind="stable")]
    w_start, w_end, w_number = start[rows], end[rows], numbers[rows]
    i = np.searchsorted(w_start, start, side="right") - 1
    inside = (i >= 0) & (start <= w_end[np.clip(i, 0, None)])
    cpu = ~gpu
    step[cpu & inside] = w_number[i[cpu & inside]]
    gpu_linked = gpu & (link >= 0)
    step[gpu_linked] = step[link[gpu_linked]]
    return step
