"""Opening a store: the refusals (not SQLite, another program's, newer than this code), the
migration of an older one, WAL with a busy timeout, and one write transaction at a time.

Why these settings: WAL lets readers (a History page) go on while a run is written;
`BEGIN IMMEDIATE` takes the write lock before reading, so two writers never deadlock on an
upgrade and wait their turn for up to BUSY_TIMEOUT_MS instead of failing with "database is
locked"; synchronous=NORMAL keeps every committed run through a crash of the app (only a power
cut may lose the last few), and a commit costs no fsync.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from profiling.store import schema

BUSY_TIMEOUT_MS = 60_000  # a writer waits its turn this long (a run's write takes ~1 ms)


class StoreError(Exception):
    """The store cannot be used: the message says why and what to do; the file is untouched."""


def _refuse(path: Path, why: str) -> StoreError:
    return StoreError(
        f"the run store {path} {why}; it was left untouched (move it aside, or choose another "
        "with --store PATH or ATTNPROF_STORE, or turn storing off with --no-store)"
    )


def check_header(path: Path) -> None:
    """Refuse a folder before SQLite opens it. The file's own header is read by SQLite (its
    first read: `_identity`), never with open(): closing any descriptor of a file drops every
    POSIX lock this process holds on it, SQLite's included, and another process then deletes
    the WAL that this process's open connections still write to (issue 40: runs lost)."""
    if path.is_dir():
        raise _refuse(path, "is a folder, not a file")


def not_sqlite(exc: sqlite3.DatabaseError) -> bool:
    """SQLite's word for a file whose header is not its own (SQLITE_NOTADB)."""
    return getattr(exc, "sqlite_errorcode", None) == 26 or "not a database" in str(exc)


def read_only_error(path: Path) -> StoreError:
    return StoreError(
        f"the run store {path} is read-only (its file, its folder or its disk): it can be "
        "read, but no run can be kept in it (choose a writable one with --store PATH or "
        "ATTNPROF_STORE, or turn storing off with --no-store)"
    )


class ReadOnly(sqlite3.Connection):
    """A connection to a store this process may not write: it is read as it is, never
    migrated, and a write is refused with read_only_error."""


def uri(path: Path, **options: str) -> str:
    """An SQLite URI naming exactly `path`: '#', '?', '%' and '&' in a file name are quoted,
    so `run#s.sqlite` is that file, not `run` (issue 40)."""
    query = "&".join(f"{name}={value}" for name, value in options.items())
    return f"file:{quote(str(path.absolute()))}" + (f"?{query}" if query else "")


def writable(path: Path) -> bool:
    """Whether this process may write an existing store, its -wal and -shm beside it
    (access(), which opens nothing: see check_header)."""
    return not path.exists() or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _read_only_connection(path: Path, **options: str) -> sqlite3.Connection:
    return sqlite3.connect(
        uri(path, mode="ro", **options), uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
        factory=ReadOnly, isolation_level=None, check_same_thread=False,
    )  # fmt: skip


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only store, read as it is (mode=ro); where SQLite cannot make the WAL's shared
    memory file beside it (a read-only folder or mount), as immutable: nobody can write it."""
    connection = _read_only_connection(path)
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:  # "unable to open": the WAL's files cannot be made
        connection.close()
        return _read_only_connection(path, immutable="1")
    except sqlite3.DatabaseError:
        pass  # not SQLite: said by _identity
    return connection


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return connection


def _identity(connection: sqlite3.Connection, path: Path) -> tuple[int, int, int]:
    """(application_id, user_version, number of tables), read without writing."""
    try:
        # one statement, so one snapshot: read one by one, a first writer's migration that
        # committed between them read as "no application id, but tables" (another program's)
        app, version, tables = connection.execute(
            "SELECT (SELECT application_id FROM pragma_application_id), "
            "(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)"
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise
        if not_sqlite(exc):
            raise _refuse(path, "is not an SQLite database (a corrupt or foreign file)") from None
        raise _refuse(path, f"cannot be read ({exc})") from None
    return app, version, tables


def _check_identity(path: Path, app: int, version: int, tables: int) -> None:
    if app not in (0, schema.APPLICATION_ID) or (app == 0 and tables):
        raise _refuse(path, "belongs to another program (not an Attention Profiler store)")
    if version > schema.VERSION:
        raise _refuse(
            path,
            f"was written by a newer version of this tool (schema {version}; this one knows "
            f"{schema.VERSION}): update the tool to read it",
        )


def open_connection(path: Path) -> sqlite3.Connection:
    """A checked, migrated connection to the store at `path` (created when absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    check_header(path)
    read_only = not writable(path)
    connection = connect_read_only(path) if read_only else _connect(path)
    try:
        app, version, tables = _identity(connection, path)
        _check_identity(path, app, version, tables)
        if read_only and version < schema.VERSION:
            why = f"is read-only and of an older schema ({version}): copy it somewhere writable"
            raise _refuse(path, why + ", where it is brought up to date when opened")
        if not read_only:
            _write_ahead_log(connection)
            connection.execute("PRAGMA synchronous = NORMAL")
            _migrate(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def _write_ahead_log(connection: sqlite3.Connection) -> None:
    """WAL mode, kept in the file once set. Switching to it takes the file's exclusive lock and
    SQLite does not wait on the busy timeout for that: a new store's first sixteen openers saw
    "database is locked" (3 in 3,200 here), so the switch is retried until the timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            connection.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Apply the steps this store lacks, in one transaction (another process may have just
    done it: the version is read again under the write lock)."""
    if connection.execute("PRAGMA user_version").fetchone()[0] == schema.VERSION:
        return
    with transaction(connection):
        app, version, tables = _identity(connection, path)
        _check_identity(path, app, version, tables)
        for script in schema.MIGRATIONS[version:]:
            for statement in schema.statements(script):
                connection.execute(statement)
        connection.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        connection.execute(f"PRAGMA user_version = {schema.VERSION}")


@contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: all of it committed, or none of it (a kill leaves nothing)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


class _Open(threading.local):
    """This thread's open connection per store: closing the last connection of a WAL store
    checkpoints it (~25 ms), more than a click may spend, so a thread keeps its own open."""

    def __init__(self) -> None:
        self.connections: dict[Path, tuple[sqlite3.Connection, tuple[int, int]]] = {}


_OPEN = _Open()


def _file_id(path: Path) -> tuple[int, int]:
    found = path.stat()
    return found.st_dev, found.st_ino


def connection_for(path: Path) -> sqlite3.Connection:
    """This thread's connection to `path`, opened (checked, migrated) when new or when the
    file was replaced since."""
    held = _OPEN.connections.get(path)
    if held is not None:
        try:
            if _file_id(path) == held[1]:
                return held[0]
        except OSError:
            pass
        _OPEN.connections.pop(path, None)
        held[0].close()
    connection = open_connection(path)
    _OPEN.connections[path] = (connection, _file_id(path))
    return connection


def forget(path: Path) -> None:
    """Close this thread's connection to `path` (a store about to be moved or read raw)."""
    held = _OPEN.connections.pop(path, None)
    if held is not None:
        held[0].close()


@contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    """This thread's connection for one operation; SQLite's damage said as a StoreError."""
    connection = connection_for(path)
    try:
        yield connection
    except sqlite3.IntegrityError as exc:  # a row its schema refuses: the store itself is sound
        raise StoreError(f"the run store {path} did not take this run ({exc}); nothing of it "
                         "was kept") from None  # fmt: skip
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_READONLY:
            raise read_only_error(path) from None
        if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc):
            raise
        forget(path)
        raise _refuse(path, f"is damaged ({exc})") from None


def read_only(path: Path) -> bool:
    """Whether the store at `path` is read here as read-only (the CLI's listing says so)."""
    return isinstance(connection_for(path), ReadOnly)
