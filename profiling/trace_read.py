"""Reading any trace, of any size the machine's memory allows: the streaming reader.

The file is inflated on a thread and cut into pieces of whole events (profiling.trace_stream);
each piece becomes columns (profiling.trace_chunks), decoded here or, once a trace is big
enough to pay for starting it, in one helper process on the other core; the pieces' columns
are merged into one EventColumns (profiling.trace_columns) for profiling.trace to build the
spans table from. Memory holds the inflated bytes of a few pieces and the columns, never the
whole JSON nor a Python object per event.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from profiling.trace_chunks import ChunkColumns, check_events, decode_piece
from profiling.trace_columns import EventColumns, merge_chunks
from profiling.trace_events import TraceError, lane_metadata
from profiling.trace_helper import Helper, PieceDecoded
from profiling.trace_stream import BadCut, Framing, inflated, pieces

HELPER_AFTER = 3  # pieces decoded here before a helper process starts (~24 MiB of JSON)
IN_FLIGHT = 2  # pieces waiting in the helper at most: bounded memory, and both cores busy


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
    try:
        return _read(source, max_bytes, progress, exact=False, helper=helper)
    except BadCut:  # a guess at where events end was wrong: read again, exactly
        return _read(source, max_bytes, progress, exact=True, helper=helper)


def _read(
    source: str | Path | bytes,
    max_bytes: int,
    progress: Callable[[float], None] | None,
    exact: bool,
    helper: bool,
) -> ReadEvents:
    framing = Framing()
    done: list[ChunkColumns | Future[ChunkColumns]] = []
    other_core: Helper | None = None
    stream = pieces(inflated(source, max_bytes, progress), framing, exact)
    try:
        for number, piece in enumerate(stream):
            if helper and other_core is None and number >= HELPER_AFTER:
                other_core = Helper()
            waiting = sum(1 for d in done if isinstance(d, Future) and not d.done())
            if other_core is not None and waiting < IN_FLIGHT:
                done.append(other_core.submit(piece))
            else:
                done.append(_decoded(piece, exact))
        chunks = [_result(d, exact) for d in done]
    finally:
        stream.close()  # stops the inflate thread when a piece failed
        if other_core is not None:
            other_core.close()
    check_events(chunks)
    lane_events = [e for c in chunks for e in c.lane_events]
    return ReadEvents(
        columns=merge_chunks(chunks),
        lane_names=lane_metadata(lane_events),
        meta=framing.meta,
        n_events=sum(c.n_events for c in chunks),
        n_flows=sum(c.n_flows for c in chunks),
    )


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
    except PieceDecoded as exc:
        if exc.kind == "trace":
            raise TraceError(str(exc)) from None
        raise _not_json(RecursionError() if exc.kind == "deep" else exc, exact) from None


def _not_json(exc: BaseException, exact: bool) -> Exception:
    """A piece that is not JSON: a wrong guess in fast mode, the file's fault in exact mode."""
    if not exact:
        return BadCut()
    if isinstance(exc, RecursionError):
        return TraceError("not valid JSON (nested too deeply)")
    return TraceError(f"not valid JSON ({exc})")
