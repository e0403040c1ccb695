"""Reading any trace, of any size the machine's memory allows: the streaming reader.

The file is inflated on a thread and cut into pieces of whole events (profiling.trace.stream);
each piece becomes columns. Where the C scanner builds (profiling.trace.scan: the machine's cc,
on first use) two threads scan pieces straight into columns (profiling.trace.scan_columns),
~3× less CPU per event than msgspec's structs, and a piece it declines goes to msgspec in a
helper process. Without it, msgspec decodes (profiling.trace.chunks) here for the first piece,
then in two helper processes, one per core (decoding beside the inflate thread ran ~1.5×
slower per piece, docs/performance.md). The pieces' columns are merged into one EventColumns
(profiling.trace.columns) for profiling.trace.model to build the spans table from. Memory holds the
inflated bytes of a few pieces and the columns, never the whole JSON nor an object per event.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from profiling.trace import scan as trace_scan
from profiling.trace.chunks import ChunkColumns, check_events, decode_piece
from profiling.trace.columns import EventColumns, merge_chunks
from profiling.trace.events import TraceError, lane_metadata
from profiling.trace.helper import Helper, PieceDecoded
from profiling.trace.scan_columns import scanned_columns
from profiling.trace.stream import BadCut, Framing, inflated, pieces

HELPER_AFTER = 1  # pieces decoded here before helper processes start (a trace past 8 MiB)
HELPERS = 2  # one per core of the 2-core target machine; this process only inflates and merges
IN_FLIGHT = 2  # pieces waiting per helper at most (threads: one more piece than threads)
THREADS = 2  # pieces scanned at once where the C scanner runs (it releases the GIL)
MAX_EVENTS = 20_000_000  # events in one trace at most: twice the 10⁷ this reader is sized for


@dataclass
class ReadEvents:
    """What the spans table is built from."""

    columns: EventColumns
    lane_names: dict[tuple[str, str], str]
    meta: dict[str, Any]  # the document's keys other than traceEvents
    n_events: int
    n_flows: int


def read_events(
    source: str | Path | bytes,
    max_bytes: int,
    progress: Callable[[float], None] | None = None,
    helper: bool = True,
) -> ReadEvents:
    """Stream a trace into columns. Raises TraceError (TraceTooBig past `max_bytes`)."""
    for exact in (False, True):
        try:
            return _read(source, max_bytes, progress, exact=exact, helper=helper)
        except BadCut as exc:  # a guess at where events end was wrong: read again, exactly
            _forget(exc)  # (its frames held the first read's columns)
        except BaseException as exc:
            _forget(exc)
            raise
    raise AssertionError("exact mode raises TraceError, never BadCut")


def _forget(exc: BaseException | None) -> None:
    """Clear the frames of a failed read held by exc's traceback (and its context's): a caller
    that keeps the error, or raises another from it (`raise ... from None` still keeps
    `__context__`), would keep every column and block the read had made (2.7 GB after a
    refused gzip bomb, until the next request)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__context__ or exc.__cause__


def _read(
    source: str | Path | bytes,
    max_bytes: int,
    progress: Callable[[float], None] | None,
    exact: bool,
    helper: bool,
) -> ReadEvents:
    framing = Framing()
    done: list[ChunkColumns | Future[ChunkColumns]] = []
    decoders = _Decoders(exact, helper)
    stream = pieces(inflated(source, max_bytes, progress), framing, exact)
    try:
        counted = _Counted()
        for number, piece in enumerate(stream):
            _wait_below(done, decoders.in_flight())
            counted.check(done)
            done.append(decoders.submit(number, piece))
        chunks = [_result(d, exact) for d in done]
        counted.check(chunks)
    finally:
        stream.close()  # stops the inflate thread when a piece failed
        decoders.close()
    check_events(chunks)
    lane_events = [e for c in chunks for e in c.lane_events]
    return ReadEvents(
        columns=merge_chunks(chunks),
        lane_names=lane_metadata(lane_events),
        meta=framing.meta,
        n_events=sum(c.n_events for c in chunks),
        n_flows=sum(c.n_flows for c in chunks),
    )


class _Decoders:
    """Who turns pieces into columns. With the C scanner (profiling.trace.scan): THREADS
    threads, each scanning a piece; a piece the scanner declines goes to msgspec in a helper
    process. Without it: msgspec, here for the first piece, then in HELPERS processes."""

    def __init__(self, exact: bool, helper: bool) -> None:
        self.exact, self.helper = exact, helper
        self.helpers: list[Helper] = []
        self.lock = threading.Lock()
        self.threads = ThreadPoolExecutor(THREADS) if trace_scan.scanner() else None
        self.texts: dict[bytes, str] = {}  # cats and names decoded so far, by their bytes

    def in_flight(self) -> int:
        return THREADS + 1 if self.threads else IN_FLIGHT * max(len(self.helpers), 1)

    def submit(self, number: int, piece: bytes) -> ChunkColumns | Future[ChunkColumns]:
        if self.threads is not None:
            return self.threads.submit(self._scanned, number, piece)
        if self.helper and number >= HELPER_AFTER:
            return self._helpers()[number % HELPERS].submit(piece)
        return _decoded(piece, self.exact)

    def _scanned(self, number: int, piece: bytes) -> ChunkColumns:
        chunk = scanned_columns(piece, self.texts)
        if chunk is not None:
            return chunk
        if self.helper:
            return self._helpers()[number % HELPERS].submit(piece).result()
        return decode_piece(piece)

    def _helpers(self) -> list[Helper]:
        with self.lock:  # started once, by whichever thread needs them first
            if not self.helpers:
                self.helpers = [Helper() for _ in range(HELPERS)]
            return self.helpers

    def close(self) -> None:
        if self.threads is not None:
            self.threads.shutdown(wait=True, cancel_futures=True)
        with self.lock:
            for each in self.helpers:
                each.close()


class _Counted:
    """Events of the pieces decoded so far, counted as they finish: past MAX_EVENTS the read
    stops (10⁷ tiny events fit in a 1.2 MB gzip)."""

    def __init__(self) -> None:
        self.pieces = self.events = 0

    def check(self, done: list[ChunkColumns | Future[ChunkColumns]]) -> None:
        for each in done[self.pieces :]:
            if isinstance(each, Future):
                if not each.done() or each.exception() is not None:
                    break  # counted later (a failure is raised by _result)
                each = each.result()
            self.events += each.n_events
            self.pieces += 1
        if self.events > MAX_EVENTS:
            raise TraceError(
                f"the trace has more than {MAX_EVENTS:,} events (the limit; torch.profiler "
                "writes a few thousand per step): profile fewer steps"
            )


def _wait_below(done: list[ChunkColumns | Future[ChunkColumns]], most: int) -> None:
    """Block until fewer than `most` pieces wait in the helpers: memory stays bounded."""
    waiting = [d for d in done[-most:] if isinstance(d, Future) and not d.done()]
    if len(waiting) >= most:
        wait(waiting, return_when=FIRST_COMPLETED)


def _decoded(piece: bytes, exact: bool) -> ChunkColumns:
    try:
        return decode_piece(piece)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _not_json(exc, exact) from None


def _result(done: ChunkColumns | Future[ChunkColumns], exact: bool) -> ChunkColumns:
    if not isinstance(done, Future):
        return done
    try:
        return done.result()
    except (msgspec.DecodeError, RecursionError) as exc:  # msgspec's, on a scanning thread
        raise _not_json(exc, exact) from None
    except PieceDecoded as exc:
        if exc.kind == "trace":
            raise TraceError(str(exc)) from None
        if exc.kind == "error":
            raise RuntimeError(f"the trace helper failed on a piece: {exc}") from None
        raise _not_json(RecursionError() if exc.kind == "deep" else exc, exact) from None


def _not_json(exc: BaseException, exact: bool) -> Exception:
    """A piece that is not JSON: a wrong guess in fast mode, the file's fault in exact mode."""
    if not exact:
        return BadCut()
    if isinstance(exc, RecursionError):
        return TraceError("not valid JSON (nested too deeply)")
    return TraceError(f"not valid JSON ({exc})")
