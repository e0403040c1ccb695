"""Opening a store, in-process (issue 41: connection.py's survivors): each refusal's words with
the path they name, the connection's settings, a file replaced under a held connection, and a
store this process may not write — read as it is, said read-only, never migrated.

Root writes a read-only file (CAP_DAC_OVERRIDE), so a read-only store is none to root: the
read-only cases act as the user `nobody` for their block (`as_nobody`), with root's saved uid
kept as the way back, so they run in this process where the mutation run can see them."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from profiling.store import StoreError, open_store, query, schema
from profiling.store import connection as store_connection
from profiling.store.write import record
from tests.store.store_helpers import run_data

NOBODY = 65534
HOW = ("; it was left untouched (move it aside, or choose another with --store PATH or "
       "ATTNPROF_STORE, or turn storing off with --no-store)")  # fmt: skip


def refusal(path: Path, why: str) -> str:
    return f"the run store {path} {why}{HOW}"


@contextmanager
def as_nobody() -> Iterator[None]:
    """This block as `nobody` where the tests run as root; as the user itself elsewhere."""
    if os.geteuid() != 0:
        yield
        return
    os.setresuid(NOBODY, NOBODY, 0)  # the saved uid 0 lets the block end as root again
    try:
        yield
    finally:
        os.setresuid(0, 0, 0)


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder `nobody` can reach (pytest's own are root's alone: 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="attnprof-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in (folder, *folder.rglob("*")):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(folder)


def _store_with_runs(folder: Path, runs: int = 2) -> tuple[Path, list[str]]:
    store = open_store(folder / "runs.sqlite")
    ids = [record(store, run_data(trace=None)).run_id for _ in range(runs)]
    store_connection.forget(store.path)  # the last connection checkpoints: no -wal, no -shm
    assert sorted(p.name for p in folder.iterdir()) == ["runs.sqlite"]
    return store.path, ids


def _read_only_run(path: Path) -> tuple[list[str], bool, str]:
    """As `nobody`: the runs listed, whether said read-only, and what a write is told."""
    with as_nobody():
        try:
            listed = sorted(query.list_runs(open_store(path))[0]["id"])
            said_read_only = query.read_only(open_store(path))
            with pytest.raises(StoreError) as refused:
                record(open_store(path), run_data(trace=None))
        finally:
            store_connection.forget(path)
    return listed, said_read_only, str(refused.value)


def _read_only_words(path: Path) -> str:
    return (f"the run store {path} is read-only (its file, its folder or its disk): it can be "
            "read, but no run can be kept in it (choose a writable one with --store PATH or "
            "ATTNPROF_STORE, or turn storing off with --no-store)")  # fmt: skip


def test_a_read_only_store_file_is_read_and_a_write_is_refused_in_words(shared_folder):
    """The folder may be written (SQLite makes the -shm it reads a WAL store through)."""
    path, ids = _store_with_runs(shared_folder)
    shared_folder.chmod(0o777)
    path.chmod(0o444)
    listed, said_read_only, refused = _read_only_run(path)
    assert (listed, said_read_only) == (sorted(ids), True)
    assert refused == _read_only_words(path)


def test_a_writable_file_in_a_read_only_folder_is_read_as_immutable(shared_folder):
    """Its -wal and -shm could not be made beside it: writable() asks for the folder too, and
    the reader falls back to immutable (nobody can write it)."""
    path, ids = _store_with_runs(shared_folder)
    if os.geteuid() == 0:  # the file is nobody's own: it may write it, not its folder
        os.chown(path, NOBODY, -1)
    path.chmod(0o644)
    shared_folder.chmod(0o555)
    with as_nobody():
        assert os.access(path, os.W_OK) and not store_connection.writable(path)
    listed, said_read_only, refused = _read_only_run(path)
    assert (listed, said_read_only) == (sorted(ids), True)
    assert refused == _read_only_words(path)
    assert sorted(p.name for p in shared_folder.iterdir()) == ["runs.sqlite"]


def test_a_read_only_store_of_an_older_schema_is_refused_with_where_to_copy_it(shared_folder):
    path, _ = _store_with_runs(shared_folder, runs=1)
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {schema.VERSION - 1}")
    connection.close()
    path.chmod(0o444)
    with as_nobody(), pytest.raises(StoreError) as refused:
        store_connection.open_connection(path)
    why = (f"is read-only and of an older schema ({schema.VERSION - 1}): copy it somewhere "
           "writable, where it is brought up to date when opened")  # fmt: skip
    assert str(refused.value) == refusal(path, why)


def test_a_file_read_only_connection_cannot_open_is_said_to_be_unreadable(shared_folder):
    """mode=ro without immutable, where the -shm cannot be made: SQLite's 'unable to open'."""
    path, _ = _store_with_runs(shared_folder, runs=1)
    shared_folder.chmod(0o555)
    path.chmod(0o444)
    with as_nobody():
        connection = store_connection._read_only_connection(path)
        try:
            with pytest.raises(StoreError) as refused:
                store_connection._identity(connection, path)
        finally:
            connection.close()
    said = str(refused.value)  # SQLite's words for it differ by version: the frame is ours
    assert said.startswith(f"the run store {path} cannot be read (") and said.endswith(HOW)


def test_a_folder_foreign_and_newer_stores_are_refused_naming_their_path(tmp_path):
    folder = tmp_path / "a-folder.sqlite"
    folder.mkdir()
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")
    connection.close()
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as connection:
        connection.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        connection.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    connection.close()
    newer_why = (f"was written by a newer version of this tool (schema {schema.VERSION + 1}; this"
                 f" one knows {schema.VERSION}): update the tool to read it")  # fmt: skip
    for path, why in [
        (folder, "is a folder, not a file"),
        (foreign, "belongs to another program (not an Attention Profiler store)"),
        (newer, newer_why),
    ]:
        with pytest.raises(StoreError) as refused:
            store_connection.open_connection(path)
        assert str(refused.value) == refusal(path, why)


def test_a_migration_checks_the_file_again_under_the_write_lock(tmp_path):
    """Another program may have made the file its own between the first check and the lock."""
    path = tmp_path / "taken.sqlite"
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("CREATE TABLE customers (name TEXT)")
    try:
        with pytest.raises(StoreError) as refused:
            store_connection._migrate(connection, path)
    finally:
        connection.close()
    why = "belongs to another program (not an Attention Profiler store)"
    assert str(refused.value) == refusal(path, why)


def test_a_locked_file_is_said_as_locked_not_as_unreadable(tmp_path, monkeypatch):
    """'database is locked' is a wait that ran out, not a damaged store: it goes up as it is."""
    monkeypatch.setattr(store_connection, "BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "busy.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")  # a rollback-journal file, as a new store's first is
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            store_connection.open_connection(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_sqlites_not_a_database_is_known_by_its_code_or_its_words():
    by_code = sqlite3.DatabaseError("le fichier n’est pas une base de données")  # a translation
    by_code.sqlite_errorcode = 26  # SQLITE_NOTADB
    assert store_connection.not_sqlite(by_code)
    corrupt = sqlite3.DatabaseError("database disk image is malformed")
    corrupt.sqlite_errorcode = 11  # SQLITE_CORRUPT: damaged, not foreign
    assert not store_connection.not_sqlite(corrupt)


def test_a_stores_uri_names_the_file_and_joins_its_options(tmp_path):
    path = tmp_path / "a#b.sqlite"
    quoted = f"file:{str(path).replace('#', '%23')}"
    assert store_connection.uri(path) == quoted
    assert store_connection.uri(path, mode="ro", immutable="1") == f"{quoted}?mode=ro&immutable=1"


def test_both_kinds_of_connection_wait_their_turn_and_commit_only_when_told(tmp_path):
    """A minute's busy timeout, no implicit transactions (BEGIN IMMEDIATE is the store's own),
    and usable from the thread a later click runs on."""
    store = open_store(tmp_path / "runs.sqlite")
    record(store, run_data(trace=None))
    writer = store_connection.connection_for(store.path)
    reader = store_connection.connect_read_only(store.path)
    try:
        for connection in (writer, reader):
            assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000
            assert connection.isolation_level is None
        assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert writer.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        seen: list = []
        other = threading.Thread(target=lambda: seen.append(
            writer.execute("SELECT count(*) FROM runs").fetchone()[0]))  # fmt: skip
        other.start()
        other.join()
        assert seen == [1]
    finally:
        reader.close()
        store_connection.forget(store.path)


def test_a_new_store_in_folders_not_yet_made_is_made(tmp_path):
    path = tmp_path / "a" / "b" / "runs.sqlite"
    store_connection.open_connection(path).close()
    assert stat.S_ISREG(path.stat().st_mode)


def test_a_held_connection_is_kept_until_its_file_is_replaced(tmp_path):
    store = open_store(tmp_path / "runs.sqlite")
    record(store, run_data(trace=None))
    held = store_connection.connection_for(store.path)
    assert store_connection.connection_for(store.path) is held
    replacement = tmp_path / "other.sqlite"
    record(open_store(replacement), run_data(trace=None))
    record(open_store(replacement), run_data(trace=None))
    store_connection.forget(replacement)
    aside = tmp_path / "aside"
    aside.mkdir()
    for name in ("runs.sqlite", "runs.sqlite-wal", "runs.sqlite-shm"):  # the user moves it
        os.replace(tmp_path / name, aside / name)
    os.replace(replacement, store.path)  # and another store in its place
    try:
        fresh = store_connection.connection_for(store.path)
        assert fresh is not held and query.list_runs(store)[1] == 2
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            held.execute("SELECT 1")
    finally:
        store_connection.forget(store.path)
