"""Runs across machines: export a store to Parquet (one row per run; each child table beside
it) or JSON Lines (one run a line, its child rows inside), with the kept traces in a folder
beside; import merges another store or an export, skipping the runs already here.

The source of an import is only read (another store is opened read-only, never migrated).
Columns this version does not know are left out; columns it has and the source lacks are NULL.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.store import schema, traces
from profiling.store.connection import (
    StoreError,
    check_header,
    connect_read_only,
    not_sqlite,
    opened,
    transaction,
)
from profiling.store.handle import Store
from profiling.store.location import traces_folder
from profiling.store.rows import plain
from profiling.store.write import insert_run, use_trace

FORMATS = (".parquet", ".jsonl")
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def _beside(path: Path, part: str) -> Path:
    """`runs.parquet` → `runs.kernels.parquet`; `runs.jsonl` → `runs.traces` (a folder)."""
    return path.with_name(f"{path.stem}.{part}{'.parquet' if part != 'traces' else ''}")


def _tables(connection: sqlite3.Connection) -> dict[str, pd.DataFrame]:
    """Every run and child row of a store, as frames."""
    found = {}
    for table in ("runs", *schema.CHILD_TABLES):
        try:
            cursor = connection.execute(f"SELECT * FROM {table} ORDER BY rowid")
        except sqlite3.OperationalError:  # an older store without this table
            found[table] = pd.DataFrame({"run_id": []})
            continue
        names = [d[0] for d in cursor.description]
        found[table] = pd.DataFrame(cursor.fetchall(), columns=names)
    return found


def _copy_traces(runs: pd.DataFrame, source: Path, target: Path) -> int:
    copied = 0
    for digest in runs["trace_hash"].dropna().unique():
        found = traces.trace_path(source, digest)
        if found.is_file() and not traces.trace_path(target, digest).exists():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, traces.trace_path(target, digest))
            copied += 1
    return copied


def export_runs(store: Store, path: str | Path) -> tuple[int, list[Path]]:
    """Write every run to `path` (.parquet or .jsonl) and the kept traces beside it;
    (runs written, files and folders written)."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise ValueError(f"export to a .parquet or .jsonl file, not {path.name}")
    with opened(store.path) as connection:
        tables = _tables(connection)
    runs = tables["runs"]
    written = [path]
    if path.suffix == ".parquet":
        runs.to_parquet(path, index=False)
        for table in schema.CHILD_TABLES:
            tables[table].to_parquet(_beside(path, table), index=False)
            written.append(_beside(path, table))
    else:
        _write_jsonl(path, tables)
    if _copy_traces(runs, store.traces, _beside(path, "traces")) or runs["trace_hash"].any():
        written.append(_beside(path, "traces"))
    return len(runs), written


def _write_jsonl(path: Path, tables: dict[str, pd.DataFrame]) -> None:
    grouped = {t: dict(tuple(tables[t].groupby("run_id"))) for t in schema.CHILD_TABLES}
    with open(path, "w", encoding="utf-8") as out:
        for run in tables["runs"].to_dict("records"):
            line = {"run": {k: plain(v) for k, v in run.items()}}
            for table in schema.CHILD_TABLES:
                rows = grouped[table].get(run["id"])
                records = [] if rows is None else rows.drop(columns="run_id").to_dict("records")
                line[table] = [{k: plain(v) for k, v in row.items()} for row in records]
            out.write(json.dumps(line, allow_nan=False) + "\n")


@dataclass
class Imported:
    added: int = 0
    skipped: int = 0  # already in the store
    traces: int = 0  # trace files copied in


def _read_source(path: Path) -> tuple[dict[str, pd.DataFrame], Path]:
    """(the source's tables, its traces folder) from a store, a .parquet or a .jsonl export."""
    if not path.is_file():
        raise ValueError(f"nothing to import at {path}")
    if path.suffix == ".parquet":
        tables = {"runs": pd.read_parquet(path)}
        for table in schema.CHILD_TABLES:
            beside = _beside(path, table)
            tables[table] = pd.read_parquet(beside) if beside.exists() else pd.DataFrame()
        return tables, _beside(path, "traces")
    if path.suffix == ".jsonl":
        return _read_jsonl(path), _beside(path, "traces")
    return _read_store(path), traces_folder(path)


def _read_jsonl(path: Path) -> dict[str, pd.DataFrame]:
    rows: dict[str, list[dict]] = {t: [] for t in ("runs", *schema.CHILD_TABLES)}
    with open(path, encoding="utf-8") as lines:
        for number, text in enumerate(lines, 1):
            try:
                line = json.loads(text)
                run = line["run"]
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{path.name} line {number} is not an exported run") from None
            rows["runs"].append(run)
            for table in schema.CHILD_TABLES:
                rows[table] += [{"run_id": run["id"], **r} for r in line.get(table) or []]
    return {table: pd.DataFrame(found) for table, found in rows.items()}


def _read_store(path: Path) -> dict[str, pd.DataFrame]:
    """Another store, opened read-only: checked like our own, never written or migrated."""
    check_header(path)
    connection = connect_read_only(path)  # its name quoted: `x?mode=rwc&y.sqlite` is that file
    try:
        app = connection.execute("PRAGMA application_id").fetchone()[0]
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if app != schema.APPLICATION_ID or version > schema.VERSION:
            raise StoreError(
                f"{path} is not a run store this version can import (application id {app}, "
                f"schema {version}; this one reads up to {schema.VERSION})"
            )
        return _tables(connection)
    except sqlite3.DatabaseError as exc:
        why = "is not an SQLite database" if not_sqlite(exc) else f"cannot be read ({exc})"
        raise StoreError(f"{path} {why}; it was left untouched") from None
    finally:
        connection.close()


def _known_columns(connection: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]


def _clean(frame: pd.DataFrame, names: list[str]) -> list[dict[str, Any]]:
    present = [n for n in names if n in frame.columns]
    return [{n: plain(row[n]) for n in present} for row in frame[present].to_dict("records")]


def import_runs(store: Store, source: str | Path) -> Imported:
    """Merge the runs of `source` not already in the store (one transaction per run)."""
    tables, folder = _read_source(Path(source))
    done = Imported()
    with opened(store.path) as connection:
        columns = {t: _known_columns(connection, t) for t in ("runs", *schema.CHILD_TABLES)}
        grouped = {t: dict(tuple(tables[t].groupby("run_id"))) if "run_id" in tables[t] else {}
                   for t in schema.CHILD_TABLES}  # fmt: skip
        have = {row[0] for row in connection.execute("SELECT id FROM runs")}
        for run in _clean(tables["runs"], columns["runs"]):
            if run["id"] in have:
                done.skipped += 1
                continue
            done.traces += _import_one(connection, store, run, grouped, columns, folder)
            have.add(run["id"])
            done.added += 1
    return done


def _import_one(connection, store: Store, run: dict, grouped: dict, columns: dict, folder: Path):
    """One imported run in its own transaction; its trace copied in when the export has it."""
    copied, digest = 0, run.get("trace_hash")
    if digest:
        found = traces.trace_path(folder, digest)
        if found.is_file():
            copied = int(not traces.trace_path(store.traces, digest).exists())
            traces.keep(found, store.traces)
        else:
            run["trace_pruned"] = 1  # the row says its trace did not come along
    children = {}
    for table in schema.CHILD_TABLES:
        rows = grouped[table].get(run["id"])
        names = [n for n in columns[table] if n != "run_id"]
        children[table] = [] if rows is None else _clean(rows, names)
    with transaction(connection):
        insert_run(connection, run, children)
        if digest and not run.get("trace_pruned"):
            use_trace(connection, digest, int(run.get("trace_bytes") or 0), run["created"])
    return copied
