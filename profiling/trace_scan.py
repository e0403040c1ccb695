"""A piece of a trace's `traceEvents` array scanned by compiled C: the reader's fast path.

Why hand-written: msgspec is the fastest maintained decoder on PyPI, but it makes a Python
object per event, and by the time those are columns they cost ~2.5 µs of CPU per event: 25 s
at 10⁷ events (docs/performance.md §7). polars' `read_json` over the same pieces saved a
quarter of that; numba compiles such a loop but costs ~0.8 s to import and load each run.
trace_scan.c walks a piece's bytes once and writes each event's fields straight into numpy
arrays (kind, spans of cat, name and args, their hashes, ids, times); profiling.trace_scan_columns
makes those the reader's columns. It is built here with the machine's C compiler on first use,
cached beside this file (or in the user's cache), and called through ctypes, which releases
the GIL, so pieces are scanned on threads beside the inflating one.

It refuses what it is not sure to read as msgspec's typed decode does (a non-ASCII byte, an
escaped key, a field of another type, a repeated key, a number it cannot convert exactly,
invalid JSON): that piece, and every piece where no compiler is found, goes to msgspec.
`ATTNPROF_SCANNER=off` turns it off (the tests compare both paths).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("trace_scan.c")  # and the JSON grammar it includes:
HEADER = SOURCE.with_name("trace_scan_json.h")
FLAGS = ["-O2", "-std=c99", "-shared", "-fPIC"]
(PH, START, END, CAT_START, CAT_END, NAME_START, NAME_END, PID, TID, ARGS_START, ARGS_END,
 CORRELATION, EXTERNAL, DIMS_START, DIMS_END, TYPES_START, TYPES_END, CONCRETE_START,
 CONCRETE_END, HAS_ID) = range(20)  # fmt: skip
N_INTS = 20  # rows of Scanned.ints, as trace_scan.c's enum says
TS, DUR = 0, 1
PH_MISSING, PH_X, PH_M, PH_S, PH_OTHER = range(5)
CAT_HASH, NAME_HASH, SHAPE_HASH = range(3)
PID_SEEN, TID_SEEN, PID_TEXT, TID_TEXT = 1, 2, 4, 8
_POINTER = np.ctypeslib.ndpointer
_I64 = ctypes.c_int64


@dataclass
class Scanned:
    """A piece's events as columns, one row per event: `ints[field]`, `floats[TS or DUR]`,
    `hashes[CAT_HASH…]`; spans index `piece`. Views of the scanning thread's tables, which its
    next piece overwrites: what is kept is copied out (profiling.trace_scan_columns)."""

    piece: bytes
    ints: np.ndarray
    floats: np.ndarray
    hashes: np.ndarray


_ROOM = 2  # trace_scan.c's answer when a piece holds more events than rows
_TYPICAL = 128  # bytes per event at least, in torch's traces: rows to start with
_tables = threading.local()  # each thread's tables, reused piece after piece (no page faults)


def scan(piece: bytes) -> Scanned | None:
    """The piece's events as columns, or None: a piece for msgspec to read (or no scanner)."""
    library = scanner()
    if library is None:
        return None
    count = _I64(0)
    for attempt in range(2):  # room for typical events, then surely room: one per `{`
        ints, floats, hashes = _room(len(piece) // _TYPICAL + 16 if attempt == 0
                                     else piece.count(b"{") + 1)  # fmt: skip
        args = (piece, len(piece), ints.shape[1], ints, floats, hashes, ctypes.byref(count))
        status = library.scan_piece(*args)
        if status != _ROOM:
            break
    if status != 0:
        return None
    rows = count.value  # views of this thread's tables: read before its next piece
    return Scanned(piece, ints[:, :rows], floats[:, :rows], hashes[:, :rows])


def _room(rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This thread's tables with room for `rows` events."""
    tables = getattr(_tables, "tables", None)
    if tables is None or tables[0].shape[1] < rows:
        tables = (np.empty((N_INTS, rows), dtype=np.int64), np.empty((2, rows), dtype=np.float64),
                  np.empty((3, rows), dtype=np.uint64))  # fmt: skip
        _tables.tables = tables
    return tables


def same_spans(piece: bytes, starts: np.ndarray, ends: np.ndarray, first: np.ndarray) -> bool:
    """Whether each span's bytes equal those of the span at row `first` of its group (the
    check that makes interning by hash exact)."""
    library = scanner()
    assert library is not None
    columns = [np.ascontiguousarray(c, dtype=np.int64) for c in (starts, ends)]
    firsts = [np.ascontiguousarray(c[first]) for c in columns]
    return bool(library.same_spans(piece, len(columns[0]), *columns, *firsts))


def gathered(piece: bytes, starts: np.ndarray, ends: np.ndarray) -> memoryview:
    """The spans as one JSON array (`{}` where a span is absent): many args, one decode. A
    view of a buffer of its own, which msgspec reads as it reads bytes, without a copy."""
    library = scanner()
    assert library is not None
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    present = starts >= 0
    room = int((ends - starts)[present].sum()) + 3 * len(starts) + 2
    out = np.empty(room, dtype=np.uint8)
    written = library.gather(piece, len(starts), starts, ends, out)
    return memoryview(out)[:written]


_lock = threading.Lock()
_loaded: list[ctypes.CDLL | None] = []
REASON: list[str] = []  # why there is no scanner, once known


def scanner() -> ctypes.CDLL | None:
    """The compiled scanner, built on first use; None where it cannot be (said in REASON)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                _loaded.append(_load())
    return _loaded[0]


def _load() -> ctypes.CDLL | None:
    if os.environ.get("ATTNPROF_SCANNER", "").lower() in ("off", "0", "no"):
        REASON.append("turned off by ATTNPROF_SCANNER")
        return None
    source = SOURCE.read_bytes() + HEADER.read_bytes()  # a change to either builds anew
    digest = hashlib.sha256(source + " ".join(FLAGS).encode() + platform.machine().encode())
    name = f"trace_scan-{digest.hexdigest()[:16]}.so"
    folders = [SOURCE.parent / "__pycache__", Path.home() / ".cache" / "attention-profiler"]
    for folder in folders:
        built = folder / name
        if built.exists() or _build(built):
            try:
                return _typed(ctypes.CDLL(str(built)))
            except OSError as exc:
                REASON.append(f"cannot load {built}: {exc}")
    return None


def _build(target: Path) -> bool:
    """Compile trace_scan.c to `target` (written under a temporary name, then renamed, so
    processes building at once never load half a file)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        REASON.append("no C compiler (cc) found: traces are decoded by msgspec")
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(handle)
        command = [compiler, *FLAGS, "-o", temporary, str(SOURCE)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            Path(temporary).unlink(missing_ok=True)
            REASON.append(f"{compiler} failed: {done.stderr.strip()[:300]}")
            return False
        os.replace(temporary, target)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        REASON.append(f"cannot build the scanner in {target.parent}: {exc}")
        return False


def _typed(library: ctypes.CDLL) -> ctypes.CDLL:
    ints = _POINTER(np.int64, flags="C_CONTIGUOUS")
    library.scan_piece.argtypes = [
        ctypes.c_char_p, _I64, _I64, _POINTER(np.int64, ndim=2, flags="C_CONTIGUOUS"),
        _POINTER(np.float64, ndim=2, flags="C_CONTIGUOUS"),
        _POINTER(np.uint64, ndim=2, flags="C_CONTIGUOUS"), ctypes.POINTER(_I64),
    ]  # fmt: skip
    library.scan_piece.restype = ctypes.c_int
    library.same_spans.argtypes = [ctypes.c_char_p, _I64, ints, ints, ints, ints]
    library.same_spans.restype = ctypes.c_int
    library.gather.argtypes = [
        ctypes.c_char_p,
        _I64,
        ints,
        ints,
        _POINTER(np.uint8, flags="C_CONTIGUOUS"),
    ]
    library.gather.restype = _I64
    return library
