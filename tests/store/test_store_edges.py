"""Issue 41 (mutmut): the run store's rules that a mutant of profiling/store/ changed with no
test noticing: a listing's filters and their refusals' words, the device filter's "cuda", a
Space's trend, the trend's rule at its edges and on a CPU, a read-only connection, the
refusals' words, the cap's stray-file cleanup, an import's line limits and refusals, and the
runs a Compare or a Sweep keeps. Real SQLite files, real exports; each test was seen failing
with its mutant applied by hand."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import sqlite3
import sys
import threading

import pandas as pd
import pytest

from profiling.analysis.summary import Summary
from profiling.store import StoreError, hooks, open_store, query
from profiling.store import connection as store_connection
from profiling.store.exchange import MAX_LINE, PARQUET_NEEDS, export_runs, import_runs
from profiling.store.traces import Pruned, trace_path
from profiling.store.trend import trend
from profiling.store.write import apply_cap, apply_runs_cap, record
from profiling.user_values import ConfigError
from tests.store.store_helpers import CONFIG, OTHER_TRACE, TRACE, count, run_data, summary


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "runs.sqlite")


def _refused(said: str, **raw) -> None:
    with pytest.raises(ConfigError) as error:
        query.checked_filters(**raw)
    assert str(error.value) == said


# -- a listing's filters ------------------------------------------------------------------------
def test_a_days_filter_is_that_whole_day_and_since_after_until_is_refused_in_words():
    one_day = query.checked_filters(since="2026-12-01", until="2026-12-01")
    assert (one_day.since, one_day.until) == ("2026-12-01", "2026-12-01")
    assert query.checked_filters(until="2026-12-01").until == "2026-12-01"  # no since
    _refused("since (2026-12-02) must not be after until (2026-12-01)",
             since="2026-12-02", until="2026-12-01")  # fmt: skip
    _refused("until must be a date as YYYY-MM-DD, not '2026-02-30'", until="2026-02-30")


def test_a_listing_holds_the_runs_made_on_the_days_asked_and_of_the_mode_asked(store):
    """Runs at a day's first and last second and the next day's first (UTC): `since` is from
    its day's start, `until` to its day's end; the mode filter narrows too."""
    days = {"first": "2026-12-01T00:00:00", "last": "2026-12-01T23:59:59",
            "next": "2026-12-02T00:00:00"}  # fmt: skip
    ids = {}
    for name, moment in days.items():
        ids[name] = record(store, run_data(mode="train" if name == "next" else "forward")).run_id
        created = dt.datetime.fromisoformat(moment).replace(tzinfo=dt.timezone.utc).timestamp()
        with sqlite3.connect(store.path) as connection:
            connection.execute("UPDATE runs SET created = ? WHERE id = ?", (created, ids[name]))

    def listed(**raw) -> set[str]:
        rows, total = query.list_runs(store, query.checked_filters(**raw))
        assert total == len(rows)
        return {name for name, run_id in ids.items() if run_id in set(rows["id"])}

    assert listed(since="2026-12-01", until="2026-12-01") == {"first", "last"}
    assert listed(until="2026-12-01") == {"first", "last"}
    assert listed(since="2026-12-02") == {"next"}
    assert listed(since="2026-12-01") == {"first", "last", "next"}
    assert listed(mode="train") == {"next"} and listed(mode="forward") == {"first", "last"}
    with pytest.raises(ConfigError, match=r"^until must be a date as YYYY-MM-DD, not 'soon'$"):
        query.list_runs(store, query.Filters(until="soon"))  # a Filters made without checking
    with pytest.raises(ConfigError, match=r"^since must be a date as YYYY-MM-DD, not 'once'$"):
        query.list_runs(store, query.Filters(since="once"))


def test_a_listings_limit_is_a_whole_number_of_1_to_10000_rows():
    assert query.checked_filters().limit == query.DEFAULT_ROWS == 200
    assert query.checked_filters(limit="").limit == query.checked_filters(limit=None).limit == 200
    assert [query.checked_filters(limit=n).limit for n in (1, 5, 7.0, 10_000)] == [1, 5, 7, 10_000]
    assert type(query.checked_filters(limit=7.0).limit) is int
    _refused("limit must be a whole number of rows, not 2.5", limit=2.5)
    _refused("limit must be a whole number of rows, not 'lots'", limit="lots")
    _refused("limit must be a whole number of rows, not True", limit=True)
    _refused("limit must be 1–10000 rows, not 0", limit=0)
    _refused("limit must be 1–10000 rows, not 10001", limit=10_001)


def test_a_text_filter_and_an_unknown_run_are_refused_naming_the_callers_value(store):
    _refused("variant must be text of at most 200 characters, not 5", variant=5)
    with pytest.raises(query.NoSuchRun) as missing:
        query.get_run(store, "nope")
    assert str(missing.value) == f"no run 'nope' in the store {store.path}"
    assert query.read_only(store) is False


def test_the_device_filter_matches_any_case_and_cuda_means_every_gpu(store):
    h200 = record(store, run_data()).run_id
    h100 = record(store, dataclasses.replace(run_data(), summary=summary(device="NVIDIA H100")))
    cpu = record(store, dataclasses.replace(run_data(device="cpu"), summary={
        **summary(), "device": "cpu", "device_name": "cpu"})).run_id  # fmt: skip

    def listed(device: str) -> set[str]:
        return set(query.list_runs(store, query.checked_filters(device=device))[0]["id"])

    assert listed("h200") == listed("H200") == {h200}
    assert listed("cuda") == listed("CUDA") == {h200, h100.run_id}
    assert listed("cpu") == {cpu}
    found = query.list_runs(store, query.checked_filters(shape="S1024", device="cuda"))[0]
    assert set(found["id"]) == {h200, h100.run_id}


def test_a_spaces_trend_holds_only_the_runs_that_space_made(store, monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/other")
    record(store, run_data(gpu_us=900.0))
    monkeypatch.setenv("SPACE_ID", "me/profiler")
    mine = [record(store, run_data(gpu_us=us)).run_id for us in (500.0, 510.0)]
    run = query.get_run(store, mine[-1])
    assert query.workload_runs(store, run)["id"].tolist() == mine


# -- the trend's rule ---------------------------------------------------------------------------
def _runs(gpu: list[float | None], cpu: list[float] | None = None) -> pd.DataFrame:
    """Runs as query.workload_runs gives them (oldest first); IQR ±5 µs around each median."""
    cpu = cpu or [80.0] * len(gpu)
    return pd.DataFrame({
        "id": [f"r{i}" for i in range(len(gpu))], "created": [float(i) for i in range(len(gpu))],
        "device_kind": ["cuda"] * len(gpu), "gpu_us_median": gpu,
        "gpu_us_q1": [None if g is None else g - 5 for g in gpu],
        "gpu_us_q3": [None if g is None else g + 5 for g in gpu],
        "cpu_us_median": cpu, "cpu_us_q1": [c - 1 for c in cpu], "cpu_us_q3": [c + 2 for c in cpu],
    })  # fmt: skip


def test_the_baseline_spread_is_the_earlier_runs_interquartile_range():
    points = trend(_runs([100.0, 200.0, 300.0, 400.0, 250.0]))
    assert points["baseline_us"].tolist()[4] == 250.0
    assert points["spread_us"].tolist()[4] == 150.0  # percentiles 25 and 75 of the four: 175, 325
    assert points["spread_us"].tolist()[2] == 50.0
    assert pd.isna(points["spread_us"][0])


def test_a_run_exactly_at_either_bound_is_not_a_regression():
    at_ten_percent = trend(_runs([1000.0, 1000.0, 1100.0]))  # +100 = 10%, spread 0
    assert at_ten_percent["regression"].tolist() == [False, False, False]
    at_spread = trend(_runs([100.0, 100.0, 140.0, 140.0, 160.0]))  # +40 = the spread, > 10%
    assert at_spread["spread_us"][4] == 40.0 and not at_spread["regression"][4]
    assert trend(_runs([100.0, 100.0, 140.0, 140.0, 161.0]))["regression"][4]


def test_a_cpu_trend_or_one_with_a_run_without_gpu_time_is_in_cpu_time():
    one_gpu_run = trend(_runs([500.0], [80.0]))
    assert (one_gpu_run["basis"][0], one_gpu_run["median_us"][0]) == ("GPU", 500.0)
    mixed = trend(_runs([500.0, None], [80.0, 90.0]))
    assert mixed["basis"].tolist() == ["CPU", "CPU"]
    times = mixed[["median_us", "q1_us", "q3_us"]].values.tolist()
    assert times == [[80.0, 79.0, 82.0], [90.0, 89.0, 92.0]]


# -- opening a store ----------------------------------------------------------------------------
def test_a_read_only_connection_reads_the_store_and_refuses_a_write(store):
    run_id = record(store, run_data(trace=None)).run_id
    connection = store_connection.connect_read_only(store.path)
    try:
        assert isinstance(connection, store_connection.ReadOnly)
        assert connection.execute("SELECT id FROM runs").fetchall() == [(run_id,)]
        with pytest.raises(sqlite3.OperationalError, match="readonly database"):
            connection.execute("DELETE FROM runs")
        other_thread: list = []
        reader = threading.Thread(target=lambda: other_thread.append(
            connection.execute("SELECT count(*) FROM runs").fetchone()))  # fmt: skip
        reader.start()
        reader.join()
        assert other_thread == [(1,)]  # a connection kept for a store may be read elsewhere
    finally:
        connection.close()
    assert count(store) == 1


def test_a_refusal_says_how_to_choose_another_store(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("not a store")
    with pytest.raises(StoreError) as refused:
        open_store(path)
        query.list_runs(open_store(path))
    assert str(refused.value) == (
        f"the run store {path} is not an SQLite database (a corrupt or foreign file); it was "
        "left untouched (move it aside, or choose another with --store PATH or ATTNPROF_STORE, "
        "or turn storing off with --no-store)"
    )


def test_forgetting_a_store_closes_its_connection_and_one_never_opened_is_no_error(store):
    store_connection.forget(store.path.with_name("never-opened.sqlite"))
    record(store, run_data(trace=None))
    held = store_connection.connection_for(store.path)
    store_connection.forget(store.path)
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        held.execute("SELECT 1")


def test_not_sqlite_reads_python_3_10s_error_which_has_no_code():
    assert store_connection.not_sqlite(sqlite3.DatabaseError("file is not a database"))
    assert not store_connection.not_sqlite(sqlite3.DatabaseError("disk I/O error"))


def test_the_prune_message_rounds_gb_and_mb_as_printed():
    said = Pruned(traces=1, bytes=1_050_000, runs=1, cap=1_375_000_000).message()
    assert "size cap (1.38 GB)" in said and "(1.1 MB, of 1 runs)" in said


# -- the caps -----------------------------------------------------------------------------------
def test_prune_by_rows_keeps_the_newest_and_refuses_a_cap_under_one(store):
    ids = [record(store, run_data(trace=t)).run_id for t in (OTHER_TRACE, None, TRACE)]
    assert apply_runs_cap(store, 1) == 2
    assert query.list_runs(store)[0]["id"].tolist() == [ids[2]]
    assert [p.name for p in store.traces.iterdir()] == [
        f"{query.get_run(store, ids[2])['trace_hash']}.json.gz"
    ]  # the deleted run's own trace went with it
    assert apply_runs_cap(store, 1) == 0
    with pytest.raises(ValueError, match=r"^the rows' cap must be 1 or more runs, not 0$"):
        apply_runs_cap(store, 0)


def test_an_old_trace_a_kept_run_names_is_no_stray(store):
    run_id = record(store, run_data()).run_id
    kept = trace_path(store.traces, query.get_run(store, run_id)["trace_hash"])
    os.utime(kept, (1.0, 1.0))  # written long ago
    assert not apply_cap(store, 10**12)
    assert kept.is_file()


# -- importing ----------------------------------------------------------------------------------
@pytest.fixture
def exported(store, tmp_path):
    """Two runs exported as JSON Lines (no traces): the lines an import reads."""
    for us in (500.0, 510.0):
        record(store, run_data(trace=None, gpu_us=us))
    path = tmp_path / "out.jsonl"
    export_runs(store, path)
    return path.read_text(encoding="utf-8").splitlines()


def test_an_import_copies_each_trace_once_and_marks_one_left_behind_as_pruned(store, tmp_path):
    """The count copied is of files new to the store; a run without a trace keeps none; a
    run whose trace file did not come with the export is kept as pruned, its row says so."""
    source = open_store(tmp_path / "source.sqlite")
    with_trace = record(source, run_data()).run_id
    without = record(source, run_data(trace=None, gpu_us=250.0)).run_id
    path = tmp_path / "runs.jsonl"
    export_runs(source, path)
    done = import_runs(store, path)
    assert (done.added, done.traces) == (2, 1)
    kept, none = query.get_run(store, with_trace), query.get_run(store, without)
    assert (kept["trace_bytes"], kept["trace_pruned"]) == (TRACE.stat().st_size, 0)
    assert (none["trace_hash"], none["trace_bytes"], none["trace_pruned"]) == (None, None, 0)
    again = open_store(tmp_path / "again.sqlite")  # holds that trace already: nothing copied
    record(again, run_data())
    assert (import_runs(again, path).added, import_runs(again, path).traces) == (2, 0)
    for file in (tmp_path / "runs.traces").iterdir():  # the export without its traces
        file.unlink()
    bare = open_store(tmp_path / "bare.sqlite")
    assert import_runs(bare, path).traces == 0
    row = query.get_run(bare, with_trace)
    assert (row["trace_hash"], row["trace_pruned"]) == (kept["trace_hash"], 1)


def _import(tmp_path, lines: list[str] | bytes, name: str = "in.jsonl"):
    path = tmp_path / name
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return import_runs(open_store(tmp_path / f"{name}.sqlite"), path)


def test_an_imports_bad_line_is_named_by_its_number(tmp_path, exported):
    for bad in ("[]", '{"run": 5}', "not json"):
        with pytest.raises(ValueError, match=r"^in.jsonl line 3 is not an exported run$"):
            _import(tmp_path, [*exported, bad])
    with pytest.raises(ValueError, match=r"^in.jsonl line 1 is not UTF-8 text$"):
        _import(tmp_path, b'{"run": {"id": "\xff"}}\n')
    line = json.loads(exported[1])
    with pytest.raises(ValueError, match=r"^in.jsonl line 2: kernels is not a list of rows$"):
        _import(tmp_path, [exported[0], json.dumps({**line, "kernels": [1, 2]})])


def test_an_imports_line_may_be_max_line_characters_and_no_more(tmp_path, exported):
    padded = exported[0] + " " * (MAX_LINE - 1 - len(exported[0]))  # with its newline: MAX_LINE
    assert _import(tmp_path, [padded, exported[1]], "at.jsonl").added == 2
    with pytest.raises(ValueError) as refused:
        _import(tmp_path, [padded + " "], "over.jsonl")
    assert str(refused.value) == (
        f"over.jsonl line 1 is longer than {MAX_LINE:,} characters; nothing was imported"
    )


def test_an_import_of_what_is_no_store_says_so(tmp_path, monkeypatch):
    fake = tmp_path / "runs.sqlite"
    fake.write_bytes(b"x" * 4096)
    with pytest.raises(StoreError, match=rf"^{fake} is not an SQLite database; it was left"):
        import_runs(open_store(tmp_path / "mine.sqlite"), fake)
    broken = tmp_path / "runs.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match=r"^runs.parquet is not a Parquet file of exported runs"):
        import_runs(open_store(tmp_path / "mine.sqlite"), broken)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # a machine without pyarrow
    monkeypatch.setitem(sys.modules, "fastparquet", None)
    with pytest.raises(ValueError) as needs:
        import_runs(open_store(tmp_path / "mine.sqlite"), broken)
    assert str(needs.value) == PARQUET_NEEDS


def test_an_import_of_a_damaged_store_says_it_cannot_be_read(store, tmp_path):
    record(store, run_data(trace=None))
    store_connection.forget(store.path)
    damaged = tmp_path / "damaged.sqlite"
    data = store.path.read_bytes()
    damaged.write_bytes(data[:4096] + b"\x00" * (len(data) - 4096))  # tables' pages zeroed
    with pytest.raises(StoreError, match=rf"^{damaged} cannot be read \(.+\); it was left"):
        import_runs(open_store(tmp_path / "mine.sqlite"), damaged)


# -- what a Compare or a Sweep keeps ------------------------------------------------------------
def _summary() -> Summary:
    names = {f.name for f in dataclasses.fields(Summary)}
    return Summary(**{k: v for k, v in summary().items() if k in names})


def test_a_compares_rows_are_kept_as_runs_ran_or_not(store, tmp_path):
    from profiling.jobs.compare import CompareResult, VariantRun

    kernels = pd.DataFrame({"kernel": ["k1"], "count": [1.0], "total_us": [3.0]})
    shape = {k: v for k, v in CONFIG.items() if k != "variant"} | {"device": "auto"}
    ran = VariantRun("sdpa-math", "SDPA · math", "ok", summary=_summary(), kernels=kernels,
                     trace_gz=TRACE)  # fmt: skip
    refused = VariantRun("naive", "naive", "refused", reason="needs 80 GiB")
    result = CompareResult(shape, "cuda", "NVIDIA H200", [ran, refused], pd.DataFrame(), tmp_path)
    kept = hooks.keep(hooks.compare_runs(result, "api"), store)
    first, second = (query.get_run(store, run_id) for run_id in kept.ids)
    assert (first["kind"], first["origin"], first["variant"], first["device"]) == (
        "compare", "api", "sdpa-math", "cuda")  # fmt: skip
    assert first["status"] == "ok" and first["gpu_us_median"] == 500.0 and first["trace_hash"]
    assert query.children(store, first["id"])["kernels"]["kernel"].tolist() == ["k1"]
    assert (second["variant"], second["status"], second["reason"]) == (
        "naive", "refused", "needs 80 GiB")  # fmt: skip
    assert second["device"] == "auto" and second["trace_hash"] is None
    assert second["summary_json"] is None


def test_a_sweeps_points_are_kept_each_at_its_length(store, tmp_path):
    from profiling.jobs.sweep import SweepPoint, SweepResult

    shape = {k: v for k, v in CONFIG.items() if k not in ("variant", "seq_len")}
    points = [SweepPoint("naive", 512, "ok", summary=_summary(), trace_gz=OTHER_TRACE),
              SweepPoint("naive", 4096, "oom", reason="out of memory")]  # fmt: skip
    result = SweepResult(shape, "cuda", "NVIDIA H200", ["naive"], [512, 4096], points,
                         pd.DataFrame(), tmp_path)  # fmt: skip
    kept = hooks.keep(hooks.sweep_runs(result, "cli"), store)
    runs = [query.get_run(store, run_id) for run_id in kept.ids]
    assert [(r["kind"], r["origin"], r["variant"], r["seq_len"], r["status"]) for r in runs] == [
        ("sweep", "cli", "naive", 512, "ok"), ("sweep", "cli", "naive", 4096, "oom")]  # fmt: skip
    assert runs[0]["trace_hash"] and runs[1]["reason"] == "out of memory"


def test_a_count_column_is_whole_again_only_where_every_value_is_whole():
    """A roofline's calls per forward may be fractional (a kernel in one of two forwards)."""
    whole = query._whole_numbers(pd.DataFrame({"calls": [1.0, 2.0]}), "roofline")
    assert whole["calls"].dtype == "int64"
    half = query._whole_numbers(pd.DataFrame({"calls": [1.0, 2.5]}), "roofline")
    assert half["calls"].tolist() == [1.0, 2.5]
    missing = query._whole_numbers(pd.DataFrame({"calls": [1.0, None]}), "roofline")
    assert missing["calls"].dtype == "float64"
