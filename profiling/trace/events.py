"""A Chrome trace file → its raw events, and what torch.profiler's event fields mean.

The reading half of the trace model (profiling.trace.model builds the spans table from what this
returns; profiling.run.records reads a run's own trace with the same rules): size limits and
gzip, msgspec decoding into slotted structs with each `args` reduced to the fields a view reads,
lenient fallbacks for traces that break the typed schema, and the vocabulary both readers share
(GPU and launch `cat`s, ProfilerStep names, ids, lane labels).
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

# torch.profiler's `cat` values (lower-cased), newer names first, older Kineto names after;
# an MTIA's on-device work is `mtia_ccp_events`, its host launches `mtia_runtime` (Kineto's
# MTIA_CCP_EVENTS and MTIA_RUNTIME, as HTA reads them).
GPU_CATS = {
    "kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset",
    "mtia_ccp_events",
}  # fmt: skip
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver", "mtia_runtime"}
# Our coarse category per span, used for colour and for the tables.
CATEGORY = {
    "kernel": "kernel",
    "mtia_ccp_events": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu annotation",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "mtia_runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "cpu_op": "cpu op",
    "operator": "cpu op",
    "user_annotation": "annotation",
    "python_function": "python",
}
LANE_NAMES = ("process_labels", "thread_name")  # the `ph: M` events that name the lanes
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_INT64 = 2**63  # ids and step numbers past int64 count as absent
_ID_DIGITS = 18  # digits any int64 step number fits in (checked before int(): no huge parse)

DEFAULT_MAX_BYTES = 2 * 1024**3  # expanded JSON; the app passes its own, smaller limits


class TraceError(ValueError):
    """The input is not a readable Chrome trace; the message says what is wrong."""


class TraceTooBig(TraceError):
    """The trace is over a size limit (callers with a way to raise it can say so)."""


def step_number(name: Any) -> int:
    """N of a `ProfilerStep#N` name, else -1: the one test for "this span is a step" (time
    zero, each span's step, the step windows and the Gantt's step lines all use it)."""
    return _step_number(name) if isinstance(name, str) else -1


@lru_cache(maxsize=65536)
def _step_number(name: str) -> int:  # a run's names repeat run after run: matched once each
    m = _STEP.match(name)
    return int(m.group(1)) if m and len(m.group(1)) <= _ID_DIGITS else -1


def valid_id(value: Any) -> int:
    """An id as the table keeps it: ids in traces are ints; anything else, or an int past
    int64, counts as absent (-1)."""
    return value if type(value) is int and -_INT64 <= value < _INT64 else -1


# A device lane whose process carries no label is named after the kind of its work where the
# work's `cat` says it (Kineto labels CUDA and ROCm devices "GPU N" itself): an MTIA is no GPU.
DEVICE_WORDS = {"mtia_ccp_events": "MTIA"}


def device_labels(
    names: dict[tuple[str, str], str], devices: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], str]:
    """`names` with (pid, "") → "MTIA <pid>" for each (pid, lower-cased cat) of device work
    whose cat is in DEVICE_WORDS and whose process has no label of its own."""
    added = {
        (pid, ""): f"{DEVICE_WORDS[cat]} {pid}"
        for pid, cat in devices
        if cat in DEVICE_WORDS and (pid, "") not in names
    }
    return {**names, **added} if added else names


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
            check_not_named_gzip(source, magic)
            size = fh.seek(0, io.SEEK_END)
            fh.seek(0)
            if size > max_bytes:
                raise too_big(max_bytes)
            return fh.read()
        stream = gzip.GzipFile(fileobj=fh)
        try:
            while chunk := stream.read(_CHUNK):
                total += len(chunk)
                if total > max_bytes:
                    chunks.clear()
                    raise too_big(max_bytes)
                chunks.append(chunk)
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
            raise TraceError(f"the gzip stream is corrupt ({exc})") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_CHUNK = 8 * 1024**2


def check_not_named_gzip(source: str | Path | bytes, magic: bytes) -> None:
    """A file named .gz must be gzip: said as such, not as JSON that fails at its first byte."""
    if isinstance(source, bytes) or not str(source).lower().endswith(".gz"):
        return
    raise TraceError(
        "the file is named .gz but is not gzip data (gzip starts with the bytes 1f 8b, this "
        f"file with {magic.hex(' ') or 'nothing'}): upload the plain .json, or gzip it"
    )


def too_big(max_bytes: int) -> TraceError:
    return TraceTooBig(
        f"the trace expands to more than {max_bytes / 1024**2:.0f} MiB of JSON; "
        "profile fewer steps or trim it"
    )


_NO_RAW = msgspec.Raw()


class EventArgs(msgspec.Struct, gc=False, frozen=True, omit_defaults=True):
    """The args fields any view reads, decoded with the event in one pass (other keys are
    skipped by the decoder): cheaper than raw JSON plus a second decode, far cheaper than a
    dict per event. A shaped op's recorded shapes stay raw JSON until read (the `input_dims`,
    `input_type` and `concrete_inputs` properties): lists of lists of ints made for millions
    of ops were a fifth of the decode, and the reader keys equal shapes by their bytes."""

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
    dims_raw: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")  # record_shapes
    types_raw: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    concrete_raw: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")
    labels: Any = None  # ph: M process_labels
    name: Any = None  # ph: M thread_name / process_name

    @property
    def input_dims(self) -> Any:
        return _raw_value(self.dims_raw)

    @property
    def input_type(self) -> Any:
        return _raw_value(self.types_raw)

    @property
    def concrete_inputs(self) -> Any:
        return _raw_value(self.concrete_raw)

    def has_shapes(self) -> bool:
        return bool(len(self.dims_raw)) and self.dims_raw != _NULL

    def detached(self) -> EventArgs:
        """The same args holding no reference to the buffer they were decoded from (a Raw
        field is a view of it: a kept one would keep a whole piece of the trace alive)."""
        if not (len(self.dims_raw) or len(self.types_raw) or len(self.concrete_raw)):
            return self
        return msgspec.structs.replace(
            self,
            dims_raw=raw_field(self.dims_raw),
            types_raw=raw_field(self.types_raw),
            concrete_raw=raw_field(self.concrete_raw),
        )


_NULL = msgspec.Raw(b"null")
_RAW_PROPERTIES = {"dims_raw": "input_dims", "types_raw": "input_type",
                   "concrete_raw": "concrete_inputs"}  # fmt: skip
_ARG_KEYS = [
    (_RAW_PROPERTIES.get(f.name, f.name), f.encode_name) for f in msgspec.structs.fields(EventArgs)
]
_NO_ARGS = EventArgs()


def raw_field(raw: bytes | msgspec.Raw) -> msgspec.Raw:
    """A Raw field's value holding its own bytes; an empty one the shared default, which the
    encoder leaves out (an empty Raw of its own would be written as nothing: broken JSON)."""
    return msgspec.Raw(bytes(raw)) if len(raw) else _NO_RAW


def _raw_value(raw: msgspec.Raw) -> Any:
    return _ARGS.decode(raw) if len(raw) else None


class _Event(msgspec.Struct, gc=False):  # gc=False: no cycles, skip tracking 10⁶ objects
    """One trace event as torch writes it; `args` stays raw JSON until a row needs it."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = ""
    tid: int | str = ""
    ts: float | None = None
    dur: float | None = None
    args: EventArgs = _NO_ARGS


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


def typed_events(data: bytes) -> list[Any]:
    """The events of a trace whose every field has the type torch writes (profiling.run.records
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
    if isinstance(value, EventArgs):
        return {key: v for attr, key in _ARG_KEYS if (v := getattr(value, attr)) is not None}
    return value if type(value) is dict else {}


def lane_metadata(events: list[Any]) -> dict[tuple[str, str], str]:
    """Readable names from `ph: M` events: (pid, "") → process label, (pid, tid) → thread name."""
    names: dict[tuple[str, str], str] = {}
    for e in events:
        if e.name not in LANE_NAMES:
            continue  # most are process_name / sort_index: no dict built for them
        a = span_args(e.args)
        pid, tid = str(e.pid if e.pid is not None else ""), str(e.tid if e.tid is not None else "")
        if e.name == "process_labels" and a.get("labels"):
            names[(pid, "")] = str(a["labels"])
        elif e.name == "thread_name" and a.get("name"):
            names[(pid, tid)] = str(a["name"]).strip()
    return names
