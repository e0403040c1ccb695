"""A piece of a trace's `traceEvents` array scanned by compiled C: the reader's fast path.

Why hand-written: msgspec is the fastest maintained decoder on PyPI, but it makes a Python
object per event, and by the time those are columns they cost ~2.5 µs of CPU per event: 25 s
at 10⁷ events (docs/performance.md §7). polars' `read_json` over the same pieces saved a
quarter of that; numba compiles such a loop but costs ~0.8 s to import and load each run.
scan.c walks a piece's bytes once and writes each event's fields straight into numpy
arrays (kind, spans of cat, name and args, their hashes, ids, times); profiling.trace.scan_columns
makes those the reader's columns. It is built here with the machine's C compiler on first use,
cached beside this file (or in the user's cache), and called through ctypes, which releases
the GIL, so pieces are scanned on threads beside the inflating one. Built on first use rather
than at install: the Space installs requirements.txt and has no build step of ours. A cached
library is loaded only if this process's user owns it and its folder and no one else can write
either (another local user could otherwise plant one that runs as this user); whether the
scanner is on, and why not, is logged once.

It refuses what it is not sure to read as msgspec's typed decode does (a non-ASCII byte, an
escaped key, a field of another type, a repeated key, a number it cannot convert exactly,
invalid JSON): that piece, and every piece where no compiler is found, goes to msgspec.
`ATTNPROF_SCANNER=off` turns it off (the tests compare both paths).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("scan.c")  # and the JSON grammar it includes:
HEADER = SOURCE.with_name("scan_json.h")
FLAGS = ["-O3", "-std=c99", "-shared", "-fPIC"]  # -O3: 8% less time a piece than -O2
BUILD_SECONDS = 120
(PH, START, END, CAT_START, CAT_END, NAME_START, NAME_END, PID, TID, ARGS_START, ARGS_END,
 CORRELATION, EXTERNAL, DIMS_START, DIMS_END, TYPES_START, TYPES_END, CONCRETE_START,
 CONCRETE_END, HAS_ID) = range(20)  # fmt: skip
N_INTS = 20  # rows of Scanned.ints, as scan.c's enum says
TS, DUR = 0, 1
PH_MISSING, PH_X, PH_M, PH_S, PH_OTHER = range(5)
CAT_HASH, NAME_HASH, SHAPE_HASH = range(3)
PID_SEEN, TID_SEEN, PID_TEXT, TID_TEXT = 1, 2, 4, 8
_POINTER = np.ctypeslib.ndpointer
_I64 = ctypes.c_int64


@dataclass
class Scanned:
    """A piece's complete (X) and metadata (M) events as columns, one row each: `ints[field]`,
    `floats[TS or DUR]`, `hashes[CAT_HASH…]`; spans index `piece`. Views of the scanning
    thread's tables, which its next piece overwrites: what is kept is copied out
    (profiling.trace.scan_columns)."""

    piece: bytes
    ints: np.ndarray
    floats: np.ndarray
    hashes: np.ndarray
    n_events: int  # every event of the piece; rows are kept only for `ph` X and M
    n_flows: int


_ROOM = 2  # scan.c's answer when a piece holds more kept events than rows
_TYPICAL = 128  # bytes per event at least, in torch's traces: rows to start with
_SMALLEST_KEPT = len(b'{"ph":"X"},')  # bytes of the smallest event that takes a row
_tables = threading.local()  # each thread's tables, reused piece after piece (no page faults)


def scan(piece: bytes) -> Scanned | None:
    """The piece's events as columns, or None: a piece for msgspec to read (or no scanner)."""
    library = scanner()
    if library is None:
        return None
    counts = np.zeros(3, dtype=np.int64)  # kept rows, events, flows
    most = len(piece) // _SMALLEST_KEPT + 2  # rows no piece of this size can outgrow
    rows = min(len(piece) // _TYPICAL + 16, most)
    while True:  # room for typical events, then twice as much until it fits: memory linear
        ints, floats, hashes = _room(rows)
        args = (piece, len(piece), ints.shape[1], ints, floats, hashes, counts)
        status = library.scan_piece(*args)
        if status != _ROOM or ints.shape[1] >= most:
            break
        rows = min(2 * ints.shape[1], most)
    if status != 0:
        return None
    kept, events, flows = counts.tolist()  # views of this thread's tables: read before its next
    return Scanned(piece, ints[:, :kept], floats[:, :kept], hashes[:, :kept], events, flows)


def _room(rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This thread's tables with room for `rows` kept events (200 bytes each)."""
    tables = getattr(_tables, "tables", None)
    if tables is None or tables[0].shape[1] < rows:
        _tables.tables = tables = None  # the old tables freed before the new are made
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
REASON: list[str] = []  # why there is no scanner (or why a folder was passed over), once known
LOADED_FROM: list[Path] = []  # the library loaded, once known
_log = logging.getLogger(__name__)


def scanner() -> ctypes.CDLL | None:
    """The compiled scanner, built on first use; None where it cannot be (said in REASON, and
    logged once: without it every trace is read 3–4× slower)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                _loaded.append(_load())
                _say(_loaded[0] is not None)
    return _loaded[0]


# Set by a parent that has said its scanner's state ("on" or "off") for the child processes it
# starts (each upload's worker): a child in the same state says it only at DEBUG, so a server's
# log has the line once, not once per upload (issue 42: 20 lines after 20 uploads).
SAID = "ATTNPROF_SCANNER_SAID"


def said_for_children() -> dict[str, str]:
    """The environment entry that tells child processes this scanner's state is said."""
    return {SAID: "on" if scanner() is not None else "off"}


def _say(on: bool) -> None:
    notes = "; ".join(REASON)
    repeated = os.environ.get(SAID) == ("on" if on else "off")
    if on:
        level = logging.WARNING if notes else logging.INFO
        _log.log(logging.DEBUG if repeated else level, "C trace scanner on (%s)%s",
                 LOADED_FROM[0], f"; passed over: {notes}" if notes else "")  # fmt: skip
    elif _turned_off() or repeated:
        _log.log(logging.DEBUG if repeated else logging.INFO, "C trace scanner off: %s", notes)
    else:
        _log.warning("C trace scanner off, traces read 3–4× slower by msgspec: %s", notes)


def _turned_off() -> bool:
    return os.environ.get("ATTNPROF_SCANNER", "").lower() in ("off", "0", "no")


def _load() -> ctypes.CDLL | None:
    if _turned_off():
        REASON.append("turned off by ATTNPROF_SCANNER")
        return None
    source = SOURCE.read_bytes() + HEADER.read_bytes()  # a change to either builds anew
    digest = hashlib.sha256(source + " ".join(FLAGS).encode() + platform.machine().encode())
    name = f"trace_scan-{digest.hexdigest()[:16]}.so"
    for folder in _folders():
        refused = _untrusted(folder, make=True)
        if refused:
            REASON.append(refused)
            continue
        built = folder / name
        if not built.exists() and not _build(built):
            continue
        library = _opened(built)
        if library is not None:
            LOADED_FROM.append(built)
            return library
    return None


def _folders() -> Iterator[Path]:
    """Where the library is cached: beside the source, else the user's cache (the home folder
    looked up only then: a process without one still reads traces)."""
    yield SOURCE.parent / "__pycache__"
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError) as exc:
        REASON.append(f"no home folder for a cache: {exc}")
        return
    yield home / ".cache" / "attention-profiler"


def _untrusted(path: Path, make: bool = False) -> str | None:
    """Why code at `path` (a folder, or a file in one) must not be loaded, or None: it must be
    this process's user's and writable by no one else, or another local user could plant a
    library that runs as this one."""
    try:
        if make:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = os.stat(path)
    except OSError as exc:
        return f"cannot use {path}: {exc}"
    return _unsafe(path, found)


def _unsafe(path: Path, found: os.stat_result) -> str | None:
    if found.st_uid != os.geteuid():
        return f"{path} is owned by uid {found.st_uid}, not this process's {os.geteuid()}"
    if found.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others (mode {stat.filemode(found.st_mode)})"
    return None


def _opened(built: Path) -> ctypes.CDLL | None:
    """The library at `built`, checked through the open file and loaded from that same file
    (/proc/self/fd), so it cannot be swapped between the check and the load."""
    try:
        handle = os.open(built, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        REASON.append(f"cannot open {built}: {exc}")
        return None
    try:
        refused = _unsafe(built, os.fstat(handle))
        if refused:
            REASON.append(refused)
            return None
        proc = Path(f"/proc/self/fd/{handle}")
        return _typed(ctypes.CDLL(str(proc if proc.exists() else built)))
    except OSError as exc:
        REASON.append(f"cannot load {built}: {exc}")
        return None
    finally:
        os.close(handle)


def _build(target: Path) -> bool:
    """Compile scan.c to `target` (written under a temporary name, then renamed, so
    processes building at once never load half a file; the temporary removed on any failure)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        REASON.append("no C compiler (cc) found: traces are decoded by msgspec")
        return False
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(handle)
        command = [compiler, *FLAGS, "-o", temporary, str(SOURCE)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_SECONDS)
        if done.returncode != 0:
            REASON.append(f"{compiler} failed: {done.stderr.strip()[:300]}")
            return False
        os.chmod(temporary, 0o755)  # whatever the umask: writable by this user only
        os.replace(temporary, target)
        temporary = None
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        REASON.append(f"cannot build the scanner in {target.parent}: {exc}")
        return False
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


def _typed(library: ctypes.CDLL) -> ctypes.CDLL:
    ints = _POINTER(np.int64, flags="C_CONTIGUOUS")
    library.scan_piece.argtypes = [
        ctypes.c_char_p, _I64, _I64, _POINTER(np.int64, ndim=2, flags="C_CONTIGUOUS"),
        _POINTER(np.float64, ndim=2, flags="C_CONTIGUOUS"),
        _POINTER(np.uint64, ndim=2, flags="C_CONTIGUOUS"),
        _POINTER(np.int64, ndim=1, shape=(3,), flags="C_CONTIGUOUS"),
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
    floats = _POINTER(np.float64, flags="C_CONTIGUOUS")
    library.renest.argtypes = [_I64, _I64, floats, floats, ctypes.c_double, ints, ints,
                               _POINTER(np.bool_, flags="C_CONTIGUOUS"), ints]  # fmt: skip
    library.renest.restype = None
    return library
