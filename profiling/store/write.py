"""Recording a run: its trace copied in under its hash, then every row in one transaction.

A kill at any point leaves either the whole run or none of it (the transaction), and at worst
an unreferenced trace file, which the next prune removes from the count it never entered.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from profiling.store import traces
from profiling.store.connection import ReadOnly, opened, read_only_error, transaction
from profiling.store.handle import Store
from profiling.store.location import this_space
from profiling.store.rows import RunData, child_rows, host_name, run_columns
from profiling.store.schema import CHILD_TABLES

log = logging.getLogger(__name__)
# a trace file no row names (or a copy never finished), older than this, is left from a
# killed write
STRAY_AGE_S = 600
ID_BYTES = 12  # 16 URL-safe characters: unguessable, short enough for a permalink


@dataclass
class Recorded:
    run_id: str
    pruned: traces.Pruned
    runs_removed: int = 0  # the oldest runs the rows' cap removed

    def notes(self, cap: int) -> list[str]:
        said = [self.pruned.message()] if self.pruned else []
        if self.runs_removed:
            said.append(runs_cap_message(self.runs_removed, cap))
        return said


def runs_cap_message(removed: int, cap: int) -> str:
    return (f"the run store passed its cap of {cap:,} runs (ATTNPROF_STORE_MAX_RUNS): the "
            f"{removed:,} oldest were deleted with their tables")  # fmt: skip


def cap_runs(connection: sqlite3.Connection, cap: int) -> int:
    """Delete the oldest runs past `cap` rows, and 1% of the cap more (so a store at its cap
    prunes once in cap/100 clicks, not at each), with their child rows; a trace no run names
    any more is marked pruned (its file goes after the commit). In the caller's transaction."""
    over = connection.execute("SELECT count(*) FROM runs").fetchone()[0] - cap
    if over <= 0:
        return 0
    over += cap // 100
    doomed = [row[0] for row in connection.execute(
        "SELECT id FROM runs ORDER BY created, id LIMIT ?", (over,))]  # fmt: skip
    connection.execute("CREATE TEMP TABLE IF NOT EXISTS doomed (id TEXT PRIMARY KEY)")
    connection.execute("DELETE FROM doomed")
    connection.executemany("INSERT INTO doomed VALUES (?)", [(i,) for i in doomed])
    for table in CHILD_TABLES:
        connection.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT id FROM doomed)")
    hashes = [row[0] for row in connection.execute(
        "SELECT DISTINCT trace_hash FROM runs WHERE id IN (SELECT id FROM doomed) "
        "AND trace_hash IS NOT NULL")]  # fmt: skip
    connection.execute("DELETE FROM runs WHERE id IN (SELECT id FROM doomed)")
    connection.executemany(
        "UPDATE traces SET pruned = 1 WHERE hash = ? AND NOT EXISTS "
        "(SELECT 1 FROM runs WHERE trace_hash = ?)", [(h, h) for h in hashes])  # fmt: skip
    connection.execute("DELETE FROM doomed")
    return len(doomed)


def new_id() -> str:
    """A run's id; never with a leading '-', which a command line reads as an option
    (`history show -nnceZwVa3jCnS3Z` failed: 1 id in 64)."""
    while (found := secrets.token_urlsafe(ID_BYTES)).startswith("-"):
        pass
    return found


def insert(connection: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Rows of one table (all with the same keys) in one statement, run for each."""
    if not rows:
        return
    names = list(rows[0])
    marks = ", ".join("?" for _ in names)
    connection.executemany(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})",
        [tuple(row[name] for name in names) for row in rows],
    )


def insert_run(
    connection: sqlite3.Connection, run: dict[str, Any], children: dict[str, list[dict]]
) -> None:
    """One run's row and its child rows (the caller holds the transaction)."""
    insert(connection, "runs", [run])
    for table, rows in children.items():
        insert(connection, table, [{"run_id": run["id"], **row} for row in rows])


def use_trace(connection: sqlite3.Connection, digest: str, size: int, when: float) -> None:
    connection.execute(
        "INSERT INTO traces (hash, bytes, last_used) VALUES (?, ?, ?) ON CONFLICT (hash) DO "
        "UPDATE SET last_used = max(last_used, excluded.last_used), pruned = 0",
        (digest, size, when),
    )


def record(store: Store, data: RunData) -> Recorded:
    """Store one run; the cap's pruning, if any, is logged and returned."""
    run_id, created = new_id(), time.time()
    run = run_columns(data, run_id, created, host_name(), this_space())
    with opened(store.path) as connection:  # checked first: a refused store gets no trace
        if isinstance(connection, ReadOnly):
            raise read_only_error(store.path)
        kept = None
        if data.trace_gz is not None and data.trace_gz.is_file():
            kept = traces.keep(data.trace_gz, store.traces)
            run["trace_hash"], run["trace_bytes"] = kept
        with transaction(connection):
            insert_run(connection, run, child_rows(data))
            if kept:
                use_trace(connection, *kept, created)
            removed = cap_runs(connection, store.max_runs)
            pruned = traces.prune(connection, store.max_bytes)
        done = Recorded(run_id, pruned, removed)
        if pruned or removed:
            traces.delete_files(store.traces, connection)
            for note in done.notes(store.max_runs):
                log.warning(note)
    return done


def apply_runs_cap(store: Store, cap: int) -> int:
    """Delete the oldest runs past `cap` now (`history prune --max-runs`); how many went."""
    if cap < 1:
        raise ValueError(f"the rows' cap must be 1 or more runs, not {cap}")
    with opened(store.path) as connection:
        with transaction(connection):
            removed = cap_runs(connection, cap)
        traces.delete_files(store.traces, connection)
    return removed


def apply_cap(store: Store, cap: int) -> traces.Pruned:
    """Prune now to `cap` bytes (`history prune`); trace files no row uses go too."""
    if cap < 0:
        raise ValueError(f"the cap must be 0 or more bytes, not {cap}")
    with opened(store.path) as connection:
        with transaction(connection):
            pruned = traces.prune(connection, cap)
        traces.delete_files(store.traces, connection)
        used = {row[0] for row in connection.execute("SELECT hash FROM traces WHERE pruned = 0")}
    settled = time.time() - STRAY_AGE_S  # a younger file may be a run being written now
    folder = store.traces
    strays = [*folder.glob("*.json.gz"), *folder.glob(traces.INCOMING_PATTERN)]
    for stray in strays if folder.is_dir() else ():
        if stray.name.removesuffix(".json.gz") not in used and stray.stat().st_mtime < settled:
            stray.unlink(missing_ok=True)
    return pruned
