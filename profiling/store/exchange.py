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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.store import imported, schema, traces
from profiling.store.connection import (
    ReadOnly,
    StoreError,
    check_header,
    connect_read_only,
    not_sqlite,
    opened,
    read_only_error,
    transaction,
)
from profiling.store.handle import Store
from profiling.store.location import traces_folder
from profiling.store.rows import plain
from profiling.store.write import insert_run, use_trace
from profiling.user_values import show

FORMATS = (".parquet", ".jsonl")
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
MAX_LINE = 2 * imported.MAX_RUN_BYTES  # characters of one JSON Lines run (its JSON's quoting)
PARQUET_NEEDS = "Parquet needs pyarrow: pip install pyarrow (or use .jsonl, which needs nothing)"


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


def _copy_traces(runs: pd.DataFrame, source: Path, target: Path) -> None:
    """The runs' kept traces into `target` (a pruned one has no file: it stays behind)."""
    for digest in runs["trace_hash"].dropna().unique():
        found = traces.trace_path(source, digest)
        if found.is_file() and not traces.trace_path(target, digest).exists():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, traces.trace_path(target, digest))


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
        try:
            runs.to_parquet(path, index=False)  # pandas picks its engine before writing
        except ImportError:
            raise ValueError(PARQUET_NEEDS) from None
        for table in schema.CHILD_TABLES:
            tables[table].to_parquet(_beside(path, table), index=False)
            written.append(_beside(path, table))
    else:
        _write_jsonl(path, tables)
    _copy_traces(runs, store.traces, _beside(path, "traces"))
    if _beside(path, "traces").is_dir():  # written now, or by an earlier export to this path
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


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except ImportError:
        raise ValueError(PARQUET_NEEDS) from None
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(f"{path.name} is not a Parquet file of exported runs ({exc})") from None


def _read_source(path: Path) -> tuple[dict[str, pd.DataFrame], Path]:
    """(the source's tables, its traces folder) from a store, a .parquet or a .jsonl export."""
    if not path.is_file():
        raise ValueError(f"nothing to import at {path}")
    if path.suffix == ".parquet":
        tables = {"runs": _read_parquet(path)}
        for table in schema.CHILD_TABLES:
            beside = _beside(path, table)
            tables[table] = _read_parquet(beside) if beside.exists() else pd.DataFrame()
        return tables, _beside(path, "traces")
    if path.suffix == ".jsonl":
        return _read_jsonl(path), _beside(path, "traces")
    return _read_store(path), traces_folder(path)


def _jsonl_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, the exported run) for each line, each at most MAX_LINE characters."""
    with open(path, encoding="utf-8") as lines:
        number = 0
        while True:
            number += 1
            try:
                text = lines.readline(MAX_LINE + 1)
            except UnicodeDecodeError:
                raise ValueError(f"{path.name} line {number} is not UTF-8 text") from None
            if not text:
                return
            if len(text) > MAX_LINE:
                raise ValueError(f"{path.name} line {number} is longer than {MAX_LINE:,} "
                                 "characters; nothing was imported")  # fmt: skip
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            if not isinstance(line, dict) or not isinstance(line.get("run"), dict):
                raise ValueError(f"{path.name} line {number} is not an exported run")
            yield number, line


def _read_jsonl(path: Path) -> dict[str, pd.DataFrame]:
    rows: dict[str, list[dict]] = {t: [] for t in ("runs", *schema.CHILD_TABLES)}
    for number, line in _jsonl_lines(path):
        run = line["run"]
        rows["runs"].append(run)
        for table in schema.CHILD_TABLES:
            found = line.get(table) or []
            if not isinstance(found, list) or not all(isinstance(r, dict) for r in found):
                raise ValueError(f"{path.name} line {number}: {table} is not a list of rows")
            rows[table] += [{**r, "run_id": run.get("id")} for r in found]
    return {t: pd.DataFrame(found) for t, found in rows.items()}


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


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as plain dicts (NaN as None), however its columns were typed."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def _checked_children(name: str, tables: dict[str, pd.DataFrame], columns: dict) -> dict:
    """{run id: {table: its rows, checked}}; a row that fails names its table and number."""
    found: dict[str, dict[str, list[dict]]] = {}
    for table in schema.CHILD_TABLES:
        frame = tables.get(table)
        if frame is None or frame.empty:
            continue
        if "run_id" not in frame.columns:
            raise ValueError(f"{name}: its {table} rows have no run_id column; nothing was "
                             "imported")  # fmt: skip
        for number, raw in enumerate(_records(frame), 1):
            try:
                row = imported.checked_child(raw, columns[table])
            except imported.Refused as exc:
                raise ValueError(f"{name}: {table} row {number}: {exc}; nothing was "
                                 "imported") from None  # fmt: skip
            run_id = row.pop("run_id")
            found.setdefault(run_id, {t: [] for t in schema.CHILD_TABLES})[table].append(row)
    return found


def _checked(name: str, tables: dict[str, pd.DataFrame], columns: dict, have: set[str]):
    """(the new runs with their child rows, every field checked; how many were already here).
    The first bad field refuses the file: nothing is imported half-way."""
    runs = tables["runs"]
    if "id" not in runs.columns:
        raise ValueError(f"{name} has no 'id' column: not an export of runs; nothing was imported")
    children = _checked_children(name, tables, columns)
    new, skipped = [], 0
    for number, raw in enumerate(_records(runs), 1):
        try:
            run = imported.checked_run(raw, columns["runs"])
            if run["id"] in have:
                skipped += 1
                continue
            mine = children.get(run["id"]) or {t: [] for t in schema.CHILD_TABLES}
            imported.check_run_size(run, mine)
            imported.check_model_summary(run, mine)
        except imported.Refused as exc:
            said = f"run {number} (id {show(raw.get('id'))})" if isinstance(raw, dict) else ""
            raise ValueError(f"{name}: {said or f'run {number}'}: {exc}; nothing was "
                             "imported") from None  # fmt: skip
        have.add(run["id"])
        new.append((run, mine))
    return new, skipped


def import_runs(store: Store, source: str | Path) -> Imported:
    """Merge the runs of `source` not already in the store, every field checked first, all in
    one transaction (imported.py says what is refused)."""
    path = Path(source)
    tables, folder = _read_source(path)
    with opened(store.path) as connection:
        if isinstance(connection, ReadOnly):
            raise read_only_error(store.path)
        columns = {t: imported.columns_of(connection, t) for t in ("runs", *schema.CHILD_TABLES)}
        have = {row[0] for row in connection.execute("SELECT id FROM runs")}
        new, skipped = _checked(path.name, tables, columns, have)
        done = Imported(added=len(new), skipped=skipped)
        done.traces = sum(_trace_in(run, folder, store) for run, _ in new)
        try:
            with transaction(connection):
                for run, children in new:
                    insert_run(connection, run, children)
                    if run.get("trace_hash") and not run.get("trace_pruned"):
                        use_trace(connection, run["trace_hash"], run["trace_bytes"],
                                  run["created"])  # fmt: skip
        except sqlite3.IntegrityError as exc:  # two rows of one phase, say
            raise ValueError(f"{path.name}: {exc}; nothing was imported") from None
    return done


def _trace_in(run: dict[str, Any], folder: Path, store: Store) -> int:
    """Copy a run's trace in when the export has it (1 when copied); its size is the file's,
    never the row's; a row whose trace did not come along is marked pruned."""
    digest = run.get("trace_hash")
    found = traces.trace_path(folder, digest) if digest else None
    if found is None:
        run["trace_bytes"], run["trace_pruned"] = None, 0
        return 0
    if not found.is_file():
        run["trace_pruned"] = 1
        return 0
    copied = int(not traces.trace_path(store.traces, digest).exists())
    run["trace_hash"], run["trace_bytes"] = traces.keep(found, store.traces)
    return copied
