"""The streaming reader's helper process: decodes pieces of a trace on the other CPU core.

    python -m profiling.trace.helper   (started by profiling.trace.read, never by hand)

Pieces arrive on stdin as (8-byte length, JSON bytes); each answer goes to stdout as (8-byte
length, pickle of ("ok", packed ChunkColumns) or (error kind, message)), in order. A plain
child process rather than multiprocessing: spawn and forkserver import the parent's
`__main__` first (app.py: gradio and torch, seconds and hundreds of MB), fork is unsafe beside
the reader's inflate thread. Only numpy and msgspec are imported here.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec

from profiling.trace.chunks import ChunkColumns, decode_piece
from profiling.trace.events import TraceError

_LENGTH = struct.Struct("<Q")
COMMAND = [sys.executable, "-m", "profiling.trace.helper"]


def _read_exactly(fd: int, size: int) -> bytearray | None:
    data = bytearray(size)
    with memoryview(data) as view:
        got = 0
        while got < size:
            read = os.readv(fd, [view[got:]])
            if not read:
                return None
            got += read
    return data


def _read_message(fd: int) -> bytearray | None:
    header = _read_exactly(fd, _LENGTH.size)
    if header is None:
        return None
    return _read_exactly(fd, _LENGTH.unpack(header)[0])


def _write_message(fd: int, data: bytes) -> None:
    """Whole messages with os.write: one system call (one release of the GIL) for megabytes,
    where a buffered stream would take the GIL back every 64 KiB and stall the reader's
    thread behind the decoding one."""
    with memoryview(_LENGTH.pack(len(data)) + data) as view:
        sent = 0
        while sent < len(view):
            sent += os.write(fd, view[sent:])


def _widen(fd: int) -> None:
    """A 1 MiB pipe buffer (Linux; 64 KiB otherwise): fewer trips per piece."""
    try:
        import fcntl

        fcntl.fcntl(fd, 1031, 1024**2)  # F_SETPIPE_SZ
    except (ImportError, OSError):
        pass


def _answer(piece: bytes) -> tuple[str, Any]:
    try:
        return "ok", decode_piece(piece, pack=True)
    except msgspec.DecodeError as exc:
        return "json", str(exc)
    except RecursionError:
        return "deep", ""
    except TraceError as exc:
        return "trace", str(exc)
    except Exception as exc:  # a bug here: said as one, not a hang or a dead helper
        return "error", f"{type(exc).__name__}: {exc}"


def main() -> None:
    gc.disable()  # pieces are acyclic; the collector's passes over them only cost time
    source, sink = sys.stdin.fileno(), sys.stdout.fileno()
    _widen(sink)
    while (piece := _read_message(source)) is not None:
        _write_message(sink, pickle.dumps(_answer(bytes(piece)), protocol=pickle.HIGHEST_PROTOCOL))


class PieceDecoded(Exception):
    """A piece the helper could not decode: `kind` says why ("json", "deep", "trace")."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Helper:
    """The helper process seen from the reader: submit() a piece, get a Future of its columns.
    Two threads move the bytes (pipe I/O releases the GIL), so the reader never waits on it."""

    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # the checkout, whatever the cwd
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        }
        self._process = subprocess.Popen(
            COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env=env,
        )
        self._outgoing: queue.Queue[bytes | None] = queue.Queue()
        self._waiting: queue.Queue[Future[ChunkColumns]] = queue.Queue()
        self._dead = threading.Event()
        self._why = "the trace helper process died"
        self._threads = [
            threading.Thread(target=self._send, name="trace-helper-send", daemon=True),
            threading.Thread(target=self._receive, name="trace-helper-receive", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, piece: bytes) -> Future[ChunkColumns]:
        future: Future[ChunkColumns] = Future()
        self._waiting.put(future)
        self._outgoing.put(piece)
        if self._dead.is_set():  # it died before this piece: nobody would answer
            self._fail_waiting()
        return future

    def _send(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        _widen(stdin.fileno())
        try:
            while (piece := self._outgoing.get()) is not None:
                _write_message(stdin.fileno(), piece)
        except OSError:
            pass  # the helper died: the receiver fails what is waiting
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def _receive(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        try:
            while (data := _read_message(stdout.fileno())) is not None:
                kind, value = pickle.loads(data)
                future = self._waiting.get()
                if kind == "ok":
                    future.set_result(value.unpack())
                else:
                    future.set_exception(PieceDecoded(kind, value))
        except MemoryError:  # under a memory cap (profiling.views.upload_worker): said, not a hang
            self._why = "the trace helper's answer did not fit in memory (MemoryError)"
        finally:
            self._dead.set()  # the helper ended (killed, out of memory, or closed)
            self._fail_waiting()

    def _fail_waiting(self) -> None:
        while True:
            try:
                future = self._waiting.get_nowait()
            except queue.Empty:
                return
            future.set_exception(RuntimeError(self._why))

    def close(self) -> None:
        """Stop the helper and wait for it (pieces still queued are dropped)."""
        while not self._outgoing.empty():
            try:
                self._outgoing.get_nowait()
            except queue.Empty:
                break
        self._outgoing.put(None)
        if self._dead.is_set() and self._process.poll() is None:
            self._process.kill()  # nobody reads its answers: the sender would wait on it
        for thread in self._threads:
            thread.join(timeout=30)
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()


if __name__ == "__main__":
    main()
