"""A Chrome trace file as a stream of pieces of its `traceEvents` array, never whole in memory.

The byte half of the streaming reader (profiling.trace.read puts it together): the file is
inflated on a thread (zlib and python-isal release the GIL, so it runs beside the decoding),
bounded by `max_bytes` as a gzip bomb must be, and cut into pieces of whole events that
msgspec decodes one at a time (profiling.trace.chunks). The keys around the array
(`deviceProperties`, `traceName`, ...) come back as the trace's metadata.

Where to cut is guessed fast (the last `}` `,` `{` in a piece: what every JSON writer puts
between two events) and checked by the decoder: a piece cut anywhere but between two events of
the array cannot decode (it ends inside a string or an object). Any failure makes the reader
start again in exact mode, where a numpy scan that knows strings and nesting finds the cuts,
and a failure there is the file's fault. Both look at each byte once, in bounded memory
(profiling.trace.frame, which also sets the limits on one event's size and nesting).
Hand-written because no maintained library splits a JSON array into pieces (ijson yields one
Python object at a time).
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

from profiling.trace import frame as trace_frame
from profiling.trace.events import TraceError, check_not_named_gzip, too_big
from profiling.trace.frame import SUB

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
            if total == 0 and stream is not fh and block[:2] == b"\x1f\x8b":
                raise TraceError(
                    "the file is gzip-compressed twice: gunzip it once (its content is "
                    "another .gz), then upload it"
                )
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
_KEY = re.compile(rb'"traceEvents"\s*:\s*')
_DOC = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ANY = msgspec.json.Decoder()


@dataclass
class Framing:
    """The document's keys other than `traceEvents` (filled as the stream passes them)."""

    meta: dict[str, Any] = field(default_factory=dict)


def pieces(blocks: Iterator[bytes], framing: Framing, exact: bool) -> Iterator[bytes]:
    """Pieces `[ev, ev, ...]` of the `traceEvents` array, in order; `framing.meta` is complete
    once the generator is exhausted. Raises TraceError (or BadCut in fast mode)."""
    buf, head = bytearray(), _Head()
    for block in blocks:
        buf += block
        if head.found(buf, framing, final=False):
            break
        if len(buf) > HEAD:  # no events array where every writer puts it: read on (a gzip
            for _ in blocks:  # bomb must still be refused as one), keep nothing
                pass
            raise TraceError(
                f"not a Chrome trace: no `traceEvents` list in its first {HEAD // 1024**2} MiB"
            )
    else:
        if not head.found(buf, framing, final=True):
            _no_array(buf)
    del head
    if exact:
        yield from _exact_pieces(buf, blocks)
    else:
        yield from _fast_pieces(buf, blocks)
    framing.meta.update(_tail(buf, framing.meta.pop("_bare", False), exact))


def _fast_pieces(buf: bytearray, blocks: Iterator[bytes]) -> Iterator[bytes]:
    """Cut at the last `}` `,` `{` once a piece's worth has arrived; the close is found at the
    end. A stretch past MAX_EVENT without a guess is left to exact mode to judge."""
    cuts = trace_frame.FastCuts()
    while True:
        cuts.advance(buf)
        if len(buf) >= PIECE and cuts.last_comma > 0:
            cut = cuts.last_comma
            yield _take(buf, cut)
            cuts.taken(cut)
        elif len(buf) > PIECE + trace_frame.MAX_EVENT:
            raise BadCut
        block = next(blocks, None)
        if block is None:
            break
        buf += block
    try:
        close = trace_frame.closing_bracket(buf)
    except TraceError:  # depth or size counted from a guessed cut: exact mode judges
        raise BadCut from None
    if close < 0:
        raise BadCut
    yield _take(buf, close)


def _exact_pieces(buf: bytearray, blocks: Iterator[bytes]) -> Iterator[bytes]:
    """Cut at the last comma between events, each byte scanned once; after the close, what
    follows (the document's other keys) is kept up to HEAD bytes."""
    cuts = trace_frame.ExactCuts()
    while True:
        cuts.advance(buf)
        if cuts.close >= 0:
            break
        if len(buf) >= PIECE and cuts.last_comma > 0:
            cut = cuts.last_comma
            yield _take(buf, cut)
            cuts.taken(cut)
        block = next(blocks, None)
        if block is None:
            raise TraceError(
                "not valid JSON: the trace is cut short (its `traceEvents` list never closes)"
            )
        buf += block
    close = cuts.close
    yield _take(buf, close)
    for block in blocks:
        buf += block
        if len(buf) > HEAD:
            for _ in blocks:  # read on: a gzip bomb is still refused as one
                pass
            raise TraceError(
                f"not a Chrome trace: more than {HEAD // 1024**2} MiB after the `traceEvents` list"
            )


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


_TRACE_EVENTS = np.frombuffer(b'"traceEvents"', dtype=np.uint8)
_HOLD = 64  # bytes at the end of the head left unscanned until more arrive (or the stream ends)


class _Head:
    """The document before the events array: scanned once, block by block, for the first
    `"traceEvents"` key of the top-level object (a candidate inside a string or a nested
    object is never decoded: 160k of them once cost 35 s); its prefix is decoded once."""

    def __init__(self) -> None:
        self.structure = trace_frame.Structure()
        self.scanned = 0
        self.pending = -1  # a key whose value has not arrived yet

    def found(self, buf: bytearray, framing: Framing, final: bool) -> bool:
        """Once the array has begun: the head's keys into framing.meta, buf from its `[` on."""
        if self.scanned == 0:
            if buf[:3] == b"\xef\xbb\xbf":  # a UTF-8 byte order mark: text editors write one
                del buf[:3]
            text = bytes(buf[:16]).lstrip()
            if text[:1] == b"[":  # a bare array of events, which the Chrome format allows
                del buf[: buf.index(b"[")]
                framing.meta["_bare"] = True
                return True
        if self.pending >= 0:
            key, self.pending = self.pending, -1
            if (answer := self._try(buf, key, framing, final)) is not None:
                return answer
        end = len(buf) if final else len(buf) - _HOLD
        while self.scanned < end:
            for key in self._scan_keys(buf, min(self.scanned + SUB, end)):
                if (answer := self._try(buf, key, framing, final)) is not None:
                    return answer
        return False

    def _scan_keys(self, buf: bytearray, end: int) -> list[int]:
        """Scan buf up to `end`: where `"traceEvents"` opens a string at the top level."""
        data = np.frombuffer(buf, dtype=np.uint8)
        start, self.scanned = self.scanned, end
        where, kind, depth = self.structure.scan(data[start:end])
        keys = self._keys(data, start + where[(kind == 1) & (depth == 1)])
        del data  # buf is resized once the key is found
        return keys

    @staticmethod
    def _keys(data: np.ndarray, quotes: np.ndarray) -> list[int]:
        """Of the strings opened at the top level, those that read `"traceEvents"`."""
        quotes = quotes[quotes + len(_TRACE_EVENTS) <= len(data)]
        if not len(quotes):
            return []
        text = data[quotes[:, None] + np.arange(len(_TRACE_EVENTS))]
        return quotes[(text == _TRACE_EVENTS).all(axis=1)].tolist()

    def _try(self, buf: bytearray, key: int, framing: Framing, final: bool) -> bool | None:
        """True: the array begins after this key; None: look on (not a list, or not yet)."""
        match = _KEY.match(buf, key)
        if match is None:
            return None
        end = match.end()
        if end >= len(buf):
            if not final:
                self.pending = key
                return False
            return None
        if buf[end] != 0x5B:
            return None  # `traceEvents` that is not a list: said at the end
        try:
            head = _DOC.decode(bytes(buf[:key]) + b'"traceEvents":0}')
        except msgspec.DecodeError as exc:
            raise TraceError(f"not valid JSON ({exc})") from None
        except RecursionError:
            raise trace_frame.too_deep() from None
        framing.meta.update(_values(head))
        del buf[:end]
        return True


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
