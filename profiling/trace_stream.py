"""A Chrome trace file as a stream of pieces of its `traceEvents` array, never whole in memory.

The byte half of the streaming reader (profiling.trace_read puts it together): the file is
inflated on a thread (zlib and python-isal release the GIL, so it runs beside the decoding),
bounded by `max_bytes` as a gzip bomb must be, and cut into pieces of whole events that
msgspec decodes one at a time (profiling.trace_chunks). The keys around the array
(`deviceProperties`, `traceName`, ...) come back as the trace's metadata.

Where to cut is guessed fast (the last `}` `,` `{` in a piece: what every JSON writer puts
between two events) and checked by the decoder: a piece cut anywhere but between two events of
the array cannot decode (it ends inside a string or an object). Any failure makes the reader
start again in exact mode, where a numpy scan that knows strings and nesting finds the cuts
(75 MB/s instead of free), and a failure there is the file's fault. Hand-written because no
maintained library splits a JSON array into pieces (ijson yields one Python object at a time).
"""

from __future__ import annotations

import gzip
import io
import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from profiling.trace_events import TraceError, check_not_named_gzip, too_big

try:  # ISA-L's inflate is about twice zlib's speed (docs/performance.md); zlib otherwise
    from isal.igzip import GzipFile as _GzipFile
    from isal.igzip_lib import IsalError as _InflateError
except ImportError:  # pragma: no cover - isal is in requirements.txt
    _GzipFile, _InflateError = gzip.GzipFile, zlib.error

BLOCK = 4 * 1024**2  # inflated bytes per read
PIECE = 8 * 1024**2  # a piece handed to the decoder: ~40,000 events
HEAD = 64 * 1024**2  # the most read before the `traceEvents` array must have begun
Progress = Callable[[float], None]  # the fraction of the file read so far


class BadCut(Exception):
    """A fast-mode piece did not decode: read again in exact mode (never shown to a user)."""


def _open(source: str | Path | bytes) -> io.BufferedIOBase:
    if isinstance(source, bytes):
        return io.BytesIO(source)
    try:
        return open(source, "rb")
    except OSError as exc:
        raise TraceError(f"cannot open trace: {exc.strerror}") from None


def _blocks(fh: io.BufferedIOBase, source: Any, max_bytes: int, progress: Progress | None):
    """The file's JSON bytes, inflated if gzip, in blocks; refused past `max_bytes`."""
    magic = fh.read(2)
    size = fh.seek(0, io.SEEK_END) or 1
    fh.seek(0)
    if magic != b"\x1f\x8b":
        check_not_named_gzip(source, magic)
        if size > max_bytes:
            raise too_big(max_bytes)
        stream: Any = fh
    else:
        stream = _GzipFile(fileobj=fh)
    total = 0
    try:
        while block := stream.read(BLOCK):
            total += len(block)
            if total > max_bytes:
                raise too_big(max_bytes)
            if progress is not None:
                progress(min(fh.tell() / size, 1.0))
            yield block
    except (OSError, EOFError, zlib.error, _InflateError) as exc:  # BadGzipFile: an OSError
        raise TraceError(f"the gzip stream is corrupt or cut short ({exc})") from None


def inflated(source: str | Path | bytes, max_bytes: int, progress: Progress | None = None):
    """`_blocks` read on a thread, a few blocks ahead of the decoder (bounded memory)."""
    handoff: queue.Queue[Any] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def produce() -> None:
        try:
            with _open(source) as fh:
                for block in _blocks(fh, source, max_bytes, progress):
                    while not stop.is_set():
                        try:
                            handoff.put(block, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
            handoff.put(None)
        except BaseException as exc:  # handed over and raised in the reader's thread
            handoff.put(exc)

    reader = threading.Thread(target=produce, name="trace-inflate", daemon=True)
    reader.start()
    try:
        while (item := handoff.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while reader.is_alive():  # let it see `stop` even if it waits on a full queue
            try:
                handoff.get_nowait()
            except queue.Empty:
                reader.join(0.05)


# -- framing: the document around the array, and the cuts between events -----------------
_CUT = re.compile(rb"\}\s*(,)\s*\{")
_KEY = re.compile(rb'"traceEvents"\s*:\s*')
_DOC = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ANY = msgspec.json.Decoder()
_LOOKAHEAD = 64 * 1024  # where the last cut is looked for first


@dataclass
class Framing:
    """The document's keys other than `traceEvents` (filled as the stream passes them)."""

    meta: dict[str, Any] = field(default_factory=dict)


def pieces(blocks: Iterator[bytes], framing: Framing, exact: bool) -> Iterator[bytes]:
    """Pieces `[ev, ev, ...]` of the `traceEvents` array, in order; `framing.meta` is complete
    once the generator is exhausted. Raises TraceError (or BadCut in fast mode)."""
    buf = bytearray()
    for block in blocks:
        buf += block
        if _head(buf, framing):
            break
        if len(buf) > HEAD:  # no events array where every writer puts it: read on (a gzip
            for _ in blocks:  # bomb must still be refused as one), keep nothing
                pass
            raise TraceError(
                f"not a Chrome trace: no `traceEvents` list in its first {HEAD // 1024**2} MiB"
            )
    else:
        _no_array(buf)
    while True:
        if len(buf) >= PIECE:
            cut = _exact_cut(buf) if exact else _fast_cut(buf)
            if cut > 0:
                yield _take(buf, cut)
        block = next(blocks, None)
        if block is None:
            break
        buf += block
    close = _scan(buf)[1]
    if close < 0:
        if exact:
            raise TraceError(
                "not valid JSON: the trace is cut short (its `traceEvents` list never closes)"
            )
        raise BadCut
    yield _take(buf, close)
    framing.meta.update(_tail(buf, framing.meta.pop("_bare", False), exact))


def _take(buf: bytearray, cut: int) -> bytes:
    """buf[0] is the separator before the piece (`[` or a comma), buf[cut] the one after: the
    piece is returned as a JSON array and buf keeps its separator for the next one."""
    buf[0], end = 0x5B, buf[cut]  # "["
    buf[cut] = 0x5D  # "]"
    with memoryview(buf) as view:
        piece = view[: cut + 1].tobytes()  # one copy (a slice of buf would be two)
    buf[cut] = end
    del buf[:cut]
    return piece


def _head(buf: bytearray, framing: Framing) -> bool:
    """Once the array has begun: the head's keys into framing.meta, buf from its `[` on."""
    text = bytes(buf[:16]).lstrip()
    if text[:1] == b"[":  # a bare array of events, which the Chrome format allows
        del buf[: buf.index(b"[")]
        framing.meta["_bare"] = True
        return True
    found = [(m.start(), m.end()) for m in _KEY.finditer(buf)]  # (no view kept on buf)
    for start, end in found:
        if end >= len(buf):
            return False  # the value has not arrived yet
        if buf[end] != 0x5B:
            continue  # `traceEvents` that is not a list: said at the end
        try:  # at the top level only if the head before it is a valid object's start
            head = _DOC.decode(bytes(buf[:start]) + b'"traceEvents":0}')
        except (msgspec.DecodeError, RecursionError):
            continue
        framing.meta.update(_values(head))
        del buf[:end]
        return True
    return False


def _values(raw: dict[str, msgspec.Raw]) -> dict[str, Any]:
    meta = {}
    for key, value in raw.items():
        if key != "traceEvents":
            try:
                meta[key] = _ANY.decode(value)
            except (msgspec.DecodeError, RecursionError):
                continue
    return meta


def _no_array(buf: bytearray) -> None:
    """The stream ended before a `traceEvents` array: say why, as the whole-file reader did."""
    try:
        _DOC.decode(bytes(buf))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise TraceError(f"not valid JSON ({exc})") from None
    raise TraceError("JSON is not a Chrome trace: no `traceEvents` list")


def _tail(buf: bytearray, bare: bool, exact: bool) -> dict[str, Any]:
    """The keys after the array (`traceName`, ...); buf holds `]` and what follows."""
    rest = bytes(buf[1:]).strip()
    try:
        if bare:
            if rest:
                raise msgspec.DecodeError("trailing characters after the array")
            return {}
        if rest[:1] == b",":
            rest = b"{" + rest[1:]
        elif rest[:1] == b"}":
            rest = b"{" + rest
        return _values(_DOC.decode(rest))
    except (msgspec.DecodeError, RecursionError) as exc:
        if not exact:
            raise BadCut from None
        if isinstance(exc, RecursionError):
            raise TraceError("not valid JSON (nested too deeply)") from None
        raise TraceError(f"not valid JSON after the events ({exc})") from None


def _fast_cut(buf: bytearray) -> int:
    """The comma after the last `}` `,` `{` in buf (0: none yet): usually between two events."""
    for start in (max(len(buf) - _LOOKAHEAD, 1), 1):
        commas = [m.start(1) for m in _CUT.finditer(buf, start)]
        if commas:
            return commas[-1]
    return 0


def _exact_cut(buf: bytearray) -> int:
    """The last comma between two events of the array in buf (0: none yet)."""
    commas, _close = _scan(buf)
    return int(commas[-1]) if len(commas) else 0


_CLASS = np.zeros(256, dtype=np.int8)
for _byte, _code in ((b'"', 1), (b"\\", 2), (b"{", 3), (b"[", 3), (b"}", 4), (b"]", 4), (b",", 5)):
    _CLASS[_byte[0]] = _code


def _scan(buf: bytearray) -> tuple[np.ndarray, int]:
    """Commas between the array's events in buf[1:], up to where it closes, and the position of
    its closing `]` (-1 if it has not closed). buf[0] is a separator, outside any string."""
    data = np.frombuffer(buf, dtype=np.uint8)
    where = np.flatnonzero(_CLASS[data])
    where = where[where > 0]
    kind = _CLASS[data[where]]
    slash = where[kind == 2]
    if len(slash):  # a backslash escapes the next byte unless itself escaped
        run_start = np.r_[True, np.diff(slash) != 1]
        offset = np.arange(len(slash)) - np.maximum.accumulate(
            np.where(run_start, np.arange(len(slash)), 0)
        )
        escaped = slash[offset % 2 == 0] + 1
        keep = (kind != 2) & ~np.isin(where, escaped)
        where, kind = where[keep], kind[keep]
    quote = kind == 1
    outside = ((np.cumsum(quote) - quote) % 2 == 0) & ~quote
    where, kind = where[outside], kind[outside]
    depth = np.cumsum(np.where(kind == 3, 1, np.where(kind == 4, -1, 0)))
    closed = np.flatnonzero(depth < 0)
    close = int(where[closed[0]]) if len(closed) else -1
    commas = where[(kind == 5) & (depth == 0)]
    if close >= 0:
        commas = commas[commas < close]
    return commas, close
