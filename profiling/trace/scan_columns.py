"""A scanned piece (profiling.trace.scan) → the same ChunkColumns msgspec's path makes.

The scanner leaves each event's fields as numbers and spans of the piece; here they become the
reader's columns with numpy: cats and names interned by their hash (every row's bytes checked
against its group's first: a hash shared by different bytes sends the piece to msgspec), GPU
work's args decoded by msgspec in one call over their gathered spans, shapes keyed by their
bytes as trace_chunks keys them. Every rule of profiling.trace.chunks._columns is repeated
here in columns, and tests/trace/test_trace_scan.py holds the two equal.
"""

from __future__ import annotations

import sys

import msgspec
import numpy as np
import pandas as pd

from profiling.trace import scan
from profiling.trace.chunks import ChunkColumns, detached, shape_args, usable_rows, work_kinds
from profiling.trace.events import _EVENTS, LANE_NAMES, EventArgs
from profiling.trace.query import first_rows

_ARGS = msgspec.json.Decoder(list[EventArgs])
_TEXT = msgspec.json.Decoder(str)
_NULL = b"null"
_BOTH_IDS = scan.PID_SEEN | scan.TID_SEEN


def scanned_columns(piece: bytes, texts: dict[bytes, str] | None = None) -> ChunkColumns | None:
    """The piece's columns, or None where msgspec must read it (trace_chunks.decode_piece).
    `texts`: the cats and names decoded so far, by their bytes as written, shared by the
    pieces of one read (a kernel name is decoded once per trace, not once per piece)."""
    texts = {} if texts is None else texts
    found = scan.scan(piece)
    if found is None:
        return None
    ints, floats = found.ints, found.floats
    ph = ints[scan.PH]
    complete = np.flatnonzero(ph == scan.PH_X)
    cats = _interned(found, complete, scan.CAT_START, scan.CAT_HASH, texts)
    if cats is None:
        return None
    cat_codes, cat_values = cats
    ts, dur = floats[scan.TS][complete], floats[scan.DUR][complete]
    usable, skipped = usable_rows(ts, dur, cat_codes, cat_values)
    rows = complete[usable]
    if (ints[scan.HAS_ID][rows] != _BOTH_IDS).any():
        return None  # a kept row's pid or tid is text or missing: msgspec's object columns
    names = _interned(found, rows, scan.NAME_START, scan.NAME_HASH, texts)
    if names is None:
        return None
    gpu, launch = work_kinds(cat_codes[usable], cat_values)
    shapes = _shapes(found, rows, ~(gpu | launch))
    if shapes is None:
        return None
    shaped, shape_codes, shape_values, shape_keys = shapes
    return ChunkColumns(
        n_events=found.n_events,
        n_flows=found.n_flows,
        n_complete=len(complete),
        lane_events=_lane_events(found),
        skipped=skipped,
        ts=ts[usable],
        dur=dur[usable],
        cat_codes=cat_codes[usable],
        cat_values=cat_values,
        name_codes=names[0],
        name_values=names[1],
        pid=ints[scan.PID][rows],
        tid=ints[scan.TID][rows],
        correlation=np.where(gpu | launch, ints[scan.CORRELATION][rows], -1),
        external=np.where(gpu | launch, ints[scan.EXTERNAL][rows], -1),
        gpu_rows=np.flatnonzero(gpu),
        gpu_args=_gpu_args(found, rows[gpu]),
        shaped_rows=shaped,
        shape_codes=shape_codes,
        shape_values=shape_values,
        shape_keys=shape_keys,
    )


def _interned(
    found: scan.Scanned, rows: np.ndarray, start: int, hashed: int, texts: dict[bytes, str]
) -> tuple[np.ndarray, list[str]] | None:
    """Codes in order of first appearance into the distinct texts (a missing one is "", the
    typed decode's default); None when two different texts share a hash."""
    starts, ends = found.ints[start][rows], found.ints[start + 1][rows]
    codes, distinct = pd.factorize(found.hashes[hashed][rows])
    first = first_rows(codes, len(distinct))
    if not scan.same_spans(found.piece, starts, ends, first[codes]):
        return None
    piece = found.piece
    values = [
        _text(piece[s:e], texts) if s >= 0 else ""
        for s, e in zip(starts[first].tolist(), ends[first].tolist(), strict=True)
    ]
    merged: dict[str, int] = {}  # spellings of one text (escapes, or missing and ""): one code
    remap = np.array([merged.setdefault(v, len(merged)) for v in values], dtype=np.int32)
    return remap[codes] if len(codes) else codes.astype(np.int32), list(merged)


def _text(raw: bytes, texts: dict[bytes, str]) -> str:
    """A JSON string's text, decoded once per read: ~300 distinct kilobyte kernel names a
    piece, decoded anew in each of ~400 pieces, were a fifth of a 10⁷-event read's column
    making (issue 42). Interned: one object for all pieces until they are merged."""
    text = texts.get(raw)
    if text is None:
        text = texts[raw] = sys.intern(_TEXT.decode(raw))
    return text


def _shapes(
    found: scan.Scanned, rows: np.ndarray, cpu: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[EventArgs], list[tuple[bytes, ...]]] | None:
    """trace_chunks._shapes' answer from the spans: the kept rows (of `rows`, the usable
    complete events) that are CPU ops with recorded shapes, a code per such row into the
    distinct shapes, and each shape's key, its three fields' bytes as written."""
    ints, piece = found.ints, found.piece
    positions = np.flatnonzero(cpu)
    dims_start = ints[scan.DIMS_START][rows[positions]]
    length = ints[scan.DIMS_END][rows[positions]] - dims_start
    recorded = dims_start >= 0
    for k in np.flatnonzero(recorded & (length == len(_NULL))).tolist():
        recorded[k] = piece[dims_start[k] : dims_start[k] + len(_NULL)] != _NULL
    shaped = positions[recorded]
    codes, distinct = pd.factorize(found.hashes[scan.SHAPE_HASH][rows[shaped]])
    first = first_rows(codes, len(distinct))
    for field in _SHAPE_FIELDS:
        starts, ends = ints[field][rows[shaped]], ints[field + 1][rows[shaped]]
        if not scan.same_spans(piece, starts, ends, first[codes]):
            return None
    keys = [
        tuple(_span(piece, ints[field][row], ints[field + 1][row]) for field in _SHAPE_FIELDS)
        for row in rows[shaped[first]].tolist()
    ]
    return shaped, codes.astype(np.int64), [shape_args(*key) for key in keys], keys


_SHAPE_FIELDS = (scan.DIMS_START, scan.TYPES_START, scan.CONCRETE_START)


def _span(piece: bytes, start: int, end: int) -> bytes:
    return piece[start:end] if start >= 0 else b""


def _gpu_args(found: scan.Scanned, rows: np.ndarray) -> list[EventArgs]:
    """GPU work's args as trace_chunks keeps them: one msgspec decode over their spans, and
    detached (copied out of the gathered buffer) only where the scan saw a shape field."""
    if not len(rows):
        return []
    starts, ends = found.ints[scan.ARGS_START][rows], found.ints[scan.ARGS_END][rows]
    args = _ARGS.decode(scan.gathered(found.piece, starts, ends))
    raw = [found.ints[field][rows] for field in _SHAPE_FIELDS]  # the only Raw fields
    return detached(args) if any((spans >= 0).any() for spans in raw) else args


def _lane_events(found: scan.Scanned) -> list:
    """`ph: M` process_labels and thread_name events, decoded as trace_chunks decodes them."""
    rows = np.flatnonzero(found.ints[scan.PH] == scan.PH_M)
    if not len(rows):
        return []
    starts, ends = found.ints[scan.START][rows], found.ints[scan.END][rows]
    events = _EVENTS.decode(scan.gathered(found.piece, starts, ends))
    return [e for e in events if e.name in LANE_NAMES]
