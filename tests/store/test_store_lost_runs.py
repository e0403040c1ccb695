"""Runs are never lost beside another process (issue 40): the store's own process must not
open its database file outside SQLite while it holds connections, or POSIX drops SQLite's
locks and another process's close deletes the write-ahead log under it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from profiling.store import open_store
from profiling.store.write import record
from tests.store.store_helpers import count, run_data

ROOT = Path(__file__).parents[2]
WRITER = """
import sys
from profiling.store import open_store
from profiling.store.write import record
from tests.store.store_helpers import run_data

store = open_store(sys.argv[1])
record(store, run_data(trace=None))
"""
ROUNDS = 6


def test_two_connections_and_another_process_lose_no_run(tmp_path):
    """This process holds one connection (the main thread's) and opens a second (a new
    thread's, as each page worker does); another process writes a run and exits, as the CLI
    does. Before the fix the second open read the file's header with open()/close(), which
    dropped the process's locks: the other process, alone to its eyes, checkpointed and
    deleted the WAL, and this process's later runs went into the deleted file (6 rounds: 12
    runs written here, most gone after a reopen)."""
    store = open_store(tmp_path / "runs.sqlite")
    record(store, run_data(trace=None))  # the main thread's connection, kept open
    written, errors = 1, []

    def page_worker() -> None:
        try:
            record(store, run_data(trace=None))
        except Exception as exc:  # "disk I/O error" was seen before the fix
            errors.append(exc)

    for _ in range(ROUNDS):
        worker = threading.Thread(target=page_worker)
        worker.start()
        worker.join()
        other = subprocess.run([sys.executable, "-c", WRITER, str(store.path)], cwd=ROOT,
                               capture_output=True, text=True)  # fmt: skip
        assert other.returncode == 0, other.stderr
        record(store, run_data(trace=None))
        written += 3
    fresh = subprocess.run(
        [sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
         ".execute('SELECT count(*) FROM runs').fetchone()[0])", str(store.path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert not errors, errors[:3]
    assert int(fresh.stdout) == written, fresh.stderr
    assert count(store) == written
