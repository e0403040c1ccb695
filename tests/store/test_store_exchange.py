"""Exports and imports (profiling/store/exchange.py) beyond the refusals of test_store_import:
what an export writes and says it wrote, an export's own files read back, one run given twice,
and an imported trace counted against the cap (issue 41: each of these broke silently under a
mutation)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from profiling.store import open_store, query, traces
from profiling.store.exchange import export_runs, import_runs
from profiling.store.schema import CHILD_TABLES
from profiling.store.write import apply_cap, record
from tests.store.store_helpers import run_data


def _source(tmp_path: Path, with_trace: bool = True):
    store = open_store(tmp_path / "source.sqlite")
    first = record(store, run_data() if with_trace else run_data(trace=None)).run_id
    record(store, run_data(trace=None, gpu_us=250.0))
    return store, first


def test_a_parquet_export_holds_each_tables_columns_and_no_index(tmp_path):
    store, _ = _source(tmp_path)
    path = tmp_path / "out" / "runs.parquet"
    path.parent.mkdir()
    export_runs(store, path)
    with sqlite3.connect(store.path) as connection:
        for table in ("runs", *CHILD_TABLES):
            names = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
            file = path if table == "runs" else path.with_name(f"runs.{table}.parquet")
            assert pq.read_schema(file).names == names, table


def test_an_export_says_every_file_and_folder_it_wrote(tmp_path):
    store, first = _source(tmp_path)
    path = tmp_path / "runs.parquet"
    n, written = export_runs(store, path)
    tables = [tmp_path / f"runs.{table}.parquet" for table in CHILD_TABLES]
    assert (n, written) == (2, [path, *tables, tmp_path / "runs.traces"])
    assert all(p.exists() for p in written)
    digest = query.get_run(store, first)["trace_hash"]
    assert sorted(p.name for p in (tmp_path / "runs.traces").iterdir()) == [f"{digest}.json.gz"]
    # again to the same place: the traces are there already, and still part of the export
    assert export_runs(store, path) == (2, written)


def test_an_export_without_traces_names_no_traces_folder(tmp_path):
    store, _ = _source(tmp_path, with_trace=False)
    path = tmp_path / "runs.jsonl"
    assert export_runs(store, path) == (2, [path])
    assert not (tmp_path / "runs.traces").exists()


def test_an_export_to_another_format_is_refused_by_name(tmp_path):
    store, _ = _source(tmp_path, with_trace=False)
    with pytest.raises(ValueError, match=r"^export to a \.parquet or \.jsonl file, not runs\.csv$"):
        export_runs(store, tmp_path / "runs.csv")


def test_a_parquet_export_without_its_child_files_imports_its_runs(tmp_path):
    store, _ = _source(tmp_path, with_trace=False)
    path = tmp_path / "runs.parquet"
    export_runs(store, path)
    for table in CHILD_TABLES:
        path.with_name(f"runs.{table}.parquet").unlink()
    target = open_store(tmp_path / "target.sqlite")
    done = import_runs(target, path)
    assert (done.added, done.skipped) == (2, 0)
    assert all(frame.empty for frame in query.children(target, query.list_runs(target)[0]
                                                         ["id"].iloc[0]).values())  # fmt: skip


def test_a_run_listed_twice_in_one_file_is_imported_once(tmp_path):
    """A Parquet export's runs file with a row repeated (its child rows once, in their own
    files): the second is skipped as already here."""
    import pandas as pd

    store, _ = _source(tmp_path, with_trace=False)
    path = tmp_path / "runs.parquet"
    export_runs(store, path)
    runs = pd.read_parquet(path)
    pd.concat([runs.iloc[:1], runs]).to_parquet(path, index=False)
    target = open_store(tmp_path / "target.sqlite")
    done = import_runs(target, path)
    assert (done.added, done.skipped) == (2, 1)


def test_an_imported_trace_is_kept_and_counted_against_the_cap(tmp_path):
    store, first = _source(tmp_path)
    path = tmp_path / "runs.jsonl"
    export_runs(store, path)
    target = open_store(tmp_path / "target.sqlite")
    done = import_runs(target, path)
    assert (done.added, done.traces) == (2, 1)
    run = query.get_run(target, first)
    kept = traces.trace_path(target.traces, run["trace_hash"])
    assert run["trace_bytes"] == kept.stat().st_size and run["trace_pruned"] == 0
    with sqlite3.connect(target.path) as connection:
        assert traces.total_bytes(connection) == kept.stat().st_size
        rows = connection.execute("SELECT hash, bytes, pruned FROM traces").fetchall()
    assert rows == [(run["trace_hash"], kept.stat().st_size, 0)]


def test_a_bad_row_after_an_empty_child_table_still_refuses_the_file(tmp_path):
    """Every child table is checked, the empty ones skipped, not the rest after them."""
    store, _ = _source(tmp_path, with_trace=False)
    path = tmp_path / "runs.jsonl"
    export_runs(store, path)
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    assert all(line["summaries"] for line in lines) and CHILD_TABLES[0] == "summaries"
    for line in lines:
        line["summaries"] = []
        line["kernels"][0]["count"] = "many"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    target = open_store(tmp_path / "target.sqlite")
    with pytest.raises(ValueError, match=r"^runs\.jsonl: kernels row 1: .*; nothing was imported$"):
        import_runs(target, path)
    assert query.list_runs(target)[1] == 0


def test_an_export_of_a_pruned_run_names_no_traces_folder(tmp_path):
    """The run keeps its trace's name, its file is gone: nothing to copy, no folder to name."""
    store, first = _source(tmp_path)
    apply_cap(store, 0)
    assert query.get_run(store, first)["trace_pruned"] == 1
    path = tmp_path / "runs.jsonl"
    assert export_runs(store, path) == (2, [path])
    assert not (tmp_path / "runs.traces").exists()


def _refused(path: Path, target_dir: Path) -> str:
    with pytest.raises(ValueError) as refused:
        import_runs(open_store(target_dir / "target.sqlite"), path)
    return str(refused.value)


def test_a_run_given_twice_with_its_rows_is_refused_whole(tmp_path):
    """Two lines of one run bring its summary twice: SQLite refuses the second, and nothing
    of the file is imported."""
    store, _ = _source(tmp_path, with_trace=False)
    path = tmp_path / "runs.jsonl"
    export_runs(store, path)
    first = path.read_text().splitlines()[0]
    path.write_text(f"{first}\n{first}\n")
    assert _refused(path, tmp_path) == (
        "runs.jsonl: UNIQUE constraint failed: summaries.run_id; nothing was imported"
    )


def test_a_child_file_without_run_ids_is_refused_by_name(tmp_path):
    import pandas as pd

    store, _ = _source(tmp_path, with_trace=False)
    path = tmp_path / "runs.parquet"
    export_runs(store, path)
    kernels = tmp_path / "runs.kernels.parquet"
    pd.read_parquet(kernels).drop(columns="run_id").to_parquet(kernels, index=False)
    assert _refused(path, tmp_path) == (
        "runs.parquet: its kernels rows have no run_id column; nothing was imported"
    )


def test_a_bad_run_is_named_by_its_number_and_id(tmp_path):
    store, _ = _source(tmp_path, with_trace=False)
    path = tmp_path / "runs.jsonl"
    export_runs(store, path)
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    lines[1]["run"]["status"] = "exploded"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    said = _refused(path, tmp_path)
    assert said.startswith(f"runs.jsonl: run 2 (id '{lines[1]['run']['id']}'): status ")
    assert said.endswith("; nothing was imported")


def test_nothing_at_the_path_is_said(tmp_path):
    assert _refused(tmp_path / "none.jsonl", tmp_path) == (
        f"nothing to import at {tmp_path / 'none.jsonl'}"
    )
