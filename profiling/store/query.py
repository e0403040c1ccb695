"""Reading the store: the runs a History table lists (filtered, newest first), one run with
its child tables, and the runs of one workload over time.

Every filter arrives from a page or an API call, so each is checked here with a message that
says what to send. A public Space lists only the runs it made itself (location.public_space).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass
from typing import Any

import pandas as pd

from profiling.store import connection as store_connection
from profiling.store.connection import opened
from profiling.store.handle import Store
from profiling.store.location import public_space
from profiling.store.rows import WHOLE_NUMBER_FIELDS
from profiling.store.schema import CHILD_TABLES
from profiling.user_values import ConfigError, show

LIST_COLUMNS = ("id", "created", "kind", "origin", "variant", "shape", "mode", "timing",
                "steps", "device_name", "status", "gpu_us_median", "gpu_us_q1", "gpu_us_q3",
                "cpu_us_median", "tflops", "peak_mib", "ran", "trace_hash",
                "trace_pruned")  # fmt: skip
MAX_ROWS = 10_000  # a listing's rows at most; the count says how many matched
DEFAULT_ROWS = 200
MAX_TEXT = 200  # characters of a text filter
DAY_S = 86_400


@dataclass
class Filters:
    """What a History listing narrows to; empty means any."""

    variant: str = ""
    shape: str = ""  # a part of the shape text, e.g. "S1024" or "bfloat16"
    mode: str = ""
    device: str = ""  # a part of the device's name ("h200", "cpu"), or "cuda": any GPU
    since: str = ""  # YYYY-MM-DD, from that day's start (UTC)
    until: str = ""  # YYYY-MM-DD, to that day's end (UTC)
    limit: int = DEFAULT_ROWS


def _text(name: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        said = f"at most {MAX_TEXT} characters"
        raise ConfigError(f"{name} must be text of {said}, not {show(value)}")
    return value.strip()


def _day(name: str, value: str, end: bool) -> float | None:
    """A day's start (or, `end`, the next day's start) in seconds; computed from the start, so
    9999-12-31's end is a number, not the OverflowError a datetime past year 9999 is."""
    if not value:
        return None
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{name} must be a date as YYYY-MM-DD, not {show(value)}") from None
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()
    return start + DAY_S if end else start


def checked_filters(**raw: Any) -> Filters:
    """Filters from a caller's loosely typed values, or a ConfigError saying what is wrong."""
    texts = {name: _text(name, raw.get(name)) for name in ("variant", "shape", "mode", "device",
                                                            "since", "until")}  # fmt: skip
    since, until = _day("since", texts["since"], False), _day("until", texts["until"], True)
    if since is not None and until is not None and since >= until:  # refused here, not later
        raise ConfigError(f"since ({texts['since']}) must not be after until ({texts['until']})")
    limit = raw.get("limit", DEFAULT_ROWS)
    if limit in (None, ""):
        limit = DEFAULT_ROWS
    if isinstance(limit, bool) or not isinstance(limit, int | float) or limit != int(limit):
        raise ConfigError(f"limit must be a whole number of rows, not {show(limit)}")
    if not 1 <= limit <= MAX_ROWS:
        raise ConfigError(f"limit must be 1–{MAX_ROWS} rows, not {show(limit)}")
    return Filters(**texts, limit=int(limit))


def _matching(connection, column: str, part: str) -> list[str]:
    """The distinct values of an indexed text column that contain `part` (case-insensitive):
    a substring filter becomes an indexed IN (a scan of 10⁵ rows' text took ~0.5 s)."""
    part = part.lower()
    found = connection.execute(f"SELECT DISTINCT {column} FROM runs WHERE {column} IS NOT NULL")
    if column == "device_name" and part == "cuda":  # every GPU run, whatever its name
        found = connection.execute(
            "SELECT DISTINCT device_name FROM runs WHERE device_kind = 'cuda'"
        )
        return [value for (value,) in found]
    return [value for (value,) in found if part in value.lower()]


def _where(filters: Filters, connection) -> tuple[str, list[Any]]:
    """The SQL WHERE clause and its values (never the caller's text inside the SQL)."""
    since, until = _day("since", filters.since, False), _day("until", filters.until, True)
    space = public_space()
    wanted = [
        ("variant = ?", [filters.variant], bool(filters.variant)),
        ("mode = ?", [filters.mode], bool(filters.mode)),
        ("created >= ?", [since], since is not None),
        ("created < ?", [until], until is not None),
        ("origin_space = ?", [space], bool(space)),
    ]
    for column, part in (("shape", filters.shape), ("device_name", filters.device)):
        if part:
            values = _matching(connection, column, part)
            marks = ", ".join("?" for _ in values)
            wanted.append((f"{column} IN ({marks})", values, True))
    clauses = [clause for clause, _, used in wanted if used]
    values = [value for _, given, used in wanted if used for value in given]
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", values


def list_runs(store: Store, filters: Filters | None = None) -> tuple[pd.DataFrame, int]:
    """(the newest `limit` runs that match, newest first; how many match in all)."""
    filters = filters or Filters()
    columns = ", ".join(LIST_COLUMNS)
    with opened(store.path) as connection:
        where, values = _where(filters, connection)
        rows = connection.execute(
            f"SELECT {columns} FROM runs{where} ORDER BY created DESC LIMIT ?",
            [*values, filters.limit],
        ).fetchall()
        total = connection.execute(f"SELECT count(*) FROM runs{where}", values).fetchone()[0]
    return pd.DataFrame(rows, columns=list(LIST_COLUMNS)), int(total)


class NoSuchRun(ConfigError):
    """An id the store does not hold (or a public Space does not list): the page says so with
    the store's file name only, the CLI with its path (str of this error)."""

    def __init__(self, run_id: str, store: Store) -> None:
        super().__init__(f"no run {show(run_id)} in the store {store.path}")
        self.run_id, self.store = run_id, store


def _visible(run: dict[str, Any]) -> bool:
    space = public_space()
    return not space or run.get("origin_space") == space


def get_run(store: Store, run_id: Any) -> dict[str, Any]:
    """One run's row as a dict; a ConfigError names an id the store does not hold."""
    if not isinstance(run_id, str) or not run_id.strip() or len(run_id) > 64:
        raise ConfigError(f"a run id is the text History shows, not {show(run_id)}")
    with opened(store.path) as connection:
        connection.row_factory = sqlite3.Row
        row = connection.execute(
            "SELECT runs.*, summaries.summary_json FROM runs LEFT JOIN summaries ON "
            "summaries.run_id = runs.id WHERE runs.id = ?",
            (run_id.strip(),),
        ).fetchone()
    run = dict(row) if row is not None else None
    if run is None or not _visible(run):
        raise NoSuchRun(run_id, store)
    return run


def children(store: Store, run_id: str) -> dict[str, pd.DataFrame]:
    """A run's child tables (phases, kernels, roles, roofline, operators), in stored order."""
    found = {}
    with opened(store.path) as connection:
        for table in CHILD_TABLES[1:]:  # the summary is get_run's
            cursor = connection.execute(
                f"SELECT * FROM {table} WHERE run_id = ? ORDER BY rowid", (run_id,)
            )
            names = [d[0] for d in cursor.description]
            found[table] = _whole_numbers(
                pd.DataFrame(cursor.fetchall(), columns=names).drop(columns="run_id"), table
            )
    return found


def _whole_numbers(frame: pd.DataFrame, table: str) -> pd.DataFrame:
    """The table's count columns as integers again where every value is one (rows.py says which)."""
    for column in WHOLE_NUMBER_FIELDS.get(table, ()):
        values = frame[column]
        if values.notna().all() and (values == values.round()).all():
            frame[column] = values.astype("int64")
    return frame


def workload_runs(store: Store, run: dict[str, Any]) -> pd.DataFrame:
    """The runs of `run`'s workload on its device that ran, oldest first (a trend's points)."""
    query = (
        "SELECT id, created, device_kind, gpu_us_median, gpu_us_q1, gpu_us_q3, cpu_us_median, "
        "cpu_us_q1, cpu_us_q3 FROM runs WHERE workload_key = ? AND device_name IS ? AND "
        "status = 'ok'" + (" AND origin_space = ?" if public_space() else "") + " ORDER BY created"
    )
    values = [run["workload_key"], run["device_name"]]
    if public_space():
        values.append(public_space())
    with opened(store.path) as connection:
        cursor = connection.execute(query, values)
        names = [d[0] for d in cursor.description]
        return pd.DataFrame(cursor.fetchall(), columns=names)


def read_only(store: Store) -> bool:
    """Whether the store is read as read-only here (its file, folder or disk is): a listing
    says so, and no run is kept in it."""
    return store_connection.read_only(store.path)
