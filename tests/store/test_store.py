"""The run store (issue 34): where it lives, what a run's row holds, the migration of an older
store and the refusals, concurrent writers, a kill mid-write, the size cap, a public Space's
listing, export and import. Real SQLite (the standard library's), real child processes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from profiling.store import StoreError, location, open_store, query, schema
from profiling.store.exchange import export_runs, import_runs
from profiling.store.traces import trace_path
from profiling.store.write import record
from profiling.user_values import ConfigError
from tests.store.store_helpers import OTHER_TRACE, TRACE, count, run_data

ROOT = Path(__file__).parents[2]


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "runs.sqlite")


def test_the_default_store_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNPROF_STORE", "off")
    assert open_store() is None
    monkeypatch.setenv("ATTNPROF_STORE", str(tmp_path / "x.sqlite"))
    assert open_store().path == (tmp_path / "x.sqlite").resolve()
    monkeypatch.delenv("ATTNPROF_STORE")
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert location.default_path() == tmp_path / "data" / "attention-profiler" / "runs.sqlite"
    monkeypatch.setenv("ATTNPROF_STORE_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="ATTNPROF_STORE_MAX_BYTES"):
        location.max_bytes()


def test_a_row_holds_the_figures_as_columns(store):
    run_id = record(store, run_data(gpu_us=512.5)).run_id
    run = query.get_run(store, run_id)
    assert len(run_id) >= 16 and run["variant"] == "sdpa-math" and run["causal"] == 1
    assert run["gpu_us_median"] == 512.5 and run["gpu_us_q1"] == 507.5
    assert run["compute_capability"] == "9.0" and run["driver_version"] == "570.1"
    assert run["sm_mhz_max"] == 1980 and run["tflops"] == 123.4
    assert run["trace_bytes"] == TRACE.stat().st_size and not run["trace_pruned"]
    tables = query.children(store, run_id)
    assert tables["kernels"]["total_us"].tolist() == [3.0, 4.0]
    assert tables["phases"]["gpu_us_median"].tolist() == [512.5]


def test_the_roofline_rows_read_back_as_the_page_showed_them(store):
    """The H200 check of issue 34 found a reopened run's summary JSON differing in `roofline`:
    the schema keeps `calls` as REAL, so 3 came back as 3.0. Records equal, value and type."""
    from profiling.analysis.role_views import as_records
    from profiling.analysis.roofline_runs import phases_roofline
    from profiling.kernels.work import AttentionShape
    from profiling.run import trace as run_trace

    trace = run_trace.read(TRACE)
    shape = AttentionShape.from_numbers(8, 16, 1024, 64, 2)
    rows = phases_roofline({n: p.spans for n, p in trace.phases.items()}, shape, "NVIDIA H200",
                           "bfloat16")  # fmt: skip
    shown = as_records(rows)
    data = run_data()
    data.roofline = pd.DataFrame(shown)
    back = as_records(query.children(store, record(store, data).run_id)["roofline"])
    assert len(shown) > 1  # compared as JSON text, where 3 and 3.0 differ
    assert json.dumps(back, default=str) == json.dumps(shown, default=str)


def test_one_copy_of_identical_traces(store, tmp_path):
    """The same trace gzipped twice as a run writes it (run_export.gzip_file: another file name
    in each header) is kept once."""
    import gzip

    from profiling.run.export import gzip_file

    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(TRACE.read_bytes()))
    copies = [tmp_path / "a.json.gz", tmp_path / "b.json.gz"]
    for path in copies:
        gzip_file(plain, path)
        record(store, run_data(trace=path))
    assert copies[0].read_bytes() != copies[1].read_bytes()
    assert count(store) == 2 and count(store, "traces") == 1
    assert len(list(store.traces.glob("*.json.gz"))) == 1


def _v1_store(path: Path) -> None:
    """A store as the first schema left it, with one run."""
    with sqlite3.connect(path) as connection:
        for statement in schema.statements(schema.MIGRATIONS[0]):
            connection.execute(statement)
        connection.execute(
            "INSERT INTO runs (id, created, kind, origin, workload_key, variant, status) "
            "VALUES ('old-run', 1.0, 'profile', 'cli', '[]', 'naive', 'ok')"
        )
        connection.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        connection.execute("PRAGMA user_version = 1")


def test_an_older_store_is_migrated_on_open(store):
    _v1_store(store.path)
    runs, total = query.list_runs(store)
    assert total == 1 and runs["id"].tolist() == ["old-run"]
    record(store, run_data())  # v2's columns and tables exist now
    with sqlite3.connect(store.path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == schema.VERSION
        assert connection.execute("SELECT count(*) FROM roofline").fetchone()[0] == 0


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _newer(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        connection.execute("PRAGMA user_version = 99")


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")


def _corrupt(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _damaged(path: Path) -> None:
    record(open_store(path), run_data())
    from profiling.store.connection import forget

    forget(path.resolve())
    with sqlite3.connect(path) as connection:  # everything in the main file, then break it
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[200:4096] = os.urandom(4096 - 200)  # the first page's schema, not its header
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (_newer, "newer version"),
        (_foreign, "another program"),
        (_corrupt, "not an SQLite"),
        (_damaged, "damaged|cannot be read"),
    ],
)
def test_a_store_it_cannot_read_is_refused_and_left_untouched(tmp_path, spoil, said):
    path = tmp_path / "runs.sqlite"
    spoil(path)
    before = sorted(p.name for p in tmp_path.iterdir()), _digest(path)
    for attempt in (lambda s: record(s, run_data()), query.list_runs):
        with pytest.raises(StoreError, match=said):
            attempt(open_store(path))
    assert (sorted(p.name for p in tmp_path.iterdir()), _digest(path)) == before


def test_sixteen_first_opens_of_a_new_store_all_succeed(tmp_path):
    """The first writer migrates while others check the file's identity: read one pragma at a
    time, a check straddling that commit saw tables without the application id and refused
    the store as another program's (33 of 40 rounds here; CI's sixteen writers hit it)."""
    from profiling.store.connection import open_connection

    errors: list[str] = []
    for round_ in range(20):
        path = tmp_path / f"round{round_}" / "runs.sqlite"
        start = threading.Barrier(16)

        def opener(path: Path = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                open_connection(path).close()
            except Exception as exc:  # "database is locked" too, seen before the fix
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=opener) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors[:3]


WRITERS, EACH = 16, 4


def test_sixteen_writers_and_a_cli_lose_no_run(store, tmp_path):
    """16 page clients (threads, each its own connection) record while the CLI imports an
    export into the same store: every run arrives and none sees "database is locked"."""
    source = open_store(tmp_path / "elsewhere.sqlite")
    for _ in range(30):
        record(source, run_data(trace=None))
    export_runs(source, tmp_path / "elsewhere.jsonl")
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS + 1)

    def client() -> None:
        start.wait()
        try:
            for _ in range(EACH):
                record(store, run_data())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    command = [sys.executable, "-m", "profiling", "history", "--store", str(store.path),
               "import", str(tmp_path / "elsewhere.jsonl")]  # fmt: skip
    cli = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    start.wait()
    for thread in threads:
        thread.join()
    _out, err = cli.communicate(timeout=120)
    assert not errors, errors[:3]
    assert cli.returncode == 0, err.decode()
    assert count(store) == WRITERS * EACH + 30


KILLED_CHILD = """
import sys, time
from pathlib import Path
from profiling.store import open_store, write
from profiling.store.write import record
from tests.store.store_helpers import run_data

store = open_store(sys.argv[1])
record(store, run_data())  # one whole run first
plain_insert = write.insert

def stalled(connection, table, rows):
    plain_insert(connection, table, rows)
    if table == "runs":  # the run's row written, its child rows not yet: wait to be killed
        Path(sys.argv[2]).write_text("between statements")
        time.sleep(600)

write.insert = stalled
record(store, run_data(gpu_us=999.0))
"""


def test_a_kill_mid_write_leaves_the_store_readable_without_the_half_run(store, tmp_path):
    marker = tmp_path / "marker"
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(store.path), str(marker)],
                             cwd=ROOT)  # fmt: skip
    deadline = time.time() + 120
    while not marker.exists() and time.time() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), "the child never reached the point between two statements"
    child.send_signal(signal.SIGKILL)
    child.wait()
    runs, total = query.list_runs(store)
    assert total == 1 and runs["gpu_us_median"].tolist() == [500.0]
    with sqlite3.connect(store.path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert connection.execute("SELECT count(*) FROM kernels").fetchone()[0] == 2


def test_the_size_cap_prunes_the_oldest_traces_and_keeps_their_rows(tmp_path):
    cap = TRACE.stat().st_size + OTHER_TRACE.stat().st_size // 2  # room for one, not both
    store = open_store(tmp_path / "runs.sqlite", max_bytes=cap)
    first = record(store, run_data(trace=OTHER_TRACE))
    assert not first.pruned
    second = record(store, run_data(trace=TRACE))
    assert second.pruned.traces == 1 and "oldest" in second.pruned.message()
    old = query.get_run(store, first.run_id)
    assert old["trace_pruned"] == 1 and old["gpu_us_median"] == 500.0  # the row outlives it
    assert not trace_path(store.traces, old["trace_hash"]).exists()
    assert query.get_run(store, second.run_id)["trace_pruned"] == 0


def test_a_public_space_lists_only_its_own_runs(store, monkeypatch):
    elsewhere = record(store, run_data()).run_id  # made off the Space (or imported)
    monkeypatch.setenv("SPACE_ID", "someone/attention-profiler")
    own = record(store, run_data()).run_id
    runs, total = query.list_runs(store)
    assert runs["id"].tolist() == [own] and total == 1
    with pytest.raises(ConfigError, match="no run"):
        query.get_run(store, elsewhere)


def test_filters_narrow_the_list_and_bad_ones_are_refused(store):
    record(store, run_data(variant="naive", seq_len=512))
    record(store, run_data())
    assert query.list_runs(store, query.checked_filters(variant="naive"))[1] == 1
    assert query.list_runs(store, query.checked_filters(shape="S1024"))[1] == 1
    assert query.list_runs(store, query.checked_filters(device="h200"))[1] == 2
    assert query.list_runs(store, query.checked_filters(since="2999-01-01"))[1] == 0
    newest = query.list_runs(store)[0]
    assert newest["created"].is_monotonic_decreasing
    with pytest.raises(ConfigError, match="YYYY-MM-DD"):
        query.checked_filters(since="yesterday")
    with pytest.raises(ConfigError, match="limit"):
        query.checked_filters(limit=10**9)


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_export_then_import_merges_and_skips_runs_already_there(tmp_path, suffix):
    here = open_store(tmp_path / "here.sqlite")
    there = open_store(tmp_path / "there.sqlite")
    shared = record(there, run_data()).run_id
    record(there, run_data(trace=OTHER_TRACE, gpu_us=250.0))
    export_runs(there, tmp_path / f"out{suffix}")
    assert import_runs(here, tmp_path / f"out{suffix}").added == 2
    again = import_runs(here, tmp_path / f"out{suffix}")
    assert (again.added, again.skipped) == (0, 2)
    mine, theirs = query.get_run(here, shared), query.get_run(there, shared)
    imported = {"origin": "import", "origin_space": ""}  # marked, whatever the file said
    assert {k: mine[k] for k in theirs} == {**theirs, **imported}
    assert query.children(here, shared)["kernels"].equals(query.children(there, shared)["kernels"])
    assert trace_path(here.traces, mine["trace_hash"]).is_file()


def test_import_of_another_store_reads_it_without_writing(tmp_path):
    there = open_store(tmp_path / "there.sqlite")
    record(there, run_data())
    from profiling.store.connection import forget

    forget(there.path)
    before = _digest(there.path)
    assert import_runs(open_store(tmp_path / "here.sqlite"), there.path).added == 1
    assert _digest(there.path) == before
    run_id = query.list_runs(there)[0]["id"][0]
    assert json.loads(query.get_run(open_store(tmp_path / "here.sqlite"), run_id)["summary_json"])


def test_a_callers_filters_and_ids_are_values_never_sql(store):
    record(store, run_data())
    for hostile in ("x' OR '1'='1", "%", "'; DROP TABLE runs; --"):
        assert query.list_runs(store, query.checked_filters(variant=hostile, shape=hostile))[1] == 0
        with pytest.raises(ConfigError, match="no run"):
            query.get_run(store, hostile)
    for bad in ({"variant": ["naive"]}, {"shape": "S" * 10_000}, {"limit": "10"},
                {"limit": True}, {"until": "2026-13-40"}):  # fmt: skip
        with pytest.raises(ConfigError):
            query.checked_filters(**bad)
    assert count(store) == 1


@pytest.mark.parametrize(
    ("medians", "flags"),
    [
        ([100, 109], [False, False]),  # within 10% of the earlier median
        ([100, 111], [False, True]),  # beyond 10%, and the one earlier run has no spread
        # the last: 15% slower than the earlier median (100) but within their IQR (20)
        ([60, 100, 140, 100, 115], [False, True, True, False, False]),
        # the last: 11% slower, beyond both 10% and the earlier runs' IQR (10)
        ([80, 100, 120, 100, 111], [False, True, True, False, True]),
        ([100, 50, 300], [False, False, True]),  # faster is never flagged; baseline 75
    ],
)
def test_the_regression_rule(medians, flags):
    from profiling.store.trend import trend

    runs = pd.DataFrame({"id": [f"r{i}" for i in range(len(medians))],
                         "created": range(len(medians)), "gpu_us_median": medians,
                         "gpu_us_q1": medians, "gpu_us_q3": medians})  # fmt: skip
    assert trend(runs)["regression"].tolist() == flags
