"""Issue 41: the run store's and History's rules that a single change to the code broke
without a test noticing (the WAL switch's retry, a re-recorded trace, an import's missing
trace and newer schema; the trend's device, the Compare's ratio and its basis, the stored
Diff's order, how many runs a pick takes). Each test here was seen failing with its rule
broken by hand. Real SQLite, real fixture traces, through the public functions."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import threading
import time
import types
from pathlib import Path

import pandas as pd
import pytest

from profiling.run import trace as run_trace
from profiling.run.runner import run
from profiling.store import StoreError, hooks, open_store, query, schema
from profiling.store.exchange import export_runs, import_runs
from profiling.store.traces import trace_path
from profiling.store.write import apply_cap, record, runs_cap_message
from profiling.user_values import ConfigError
from profiling.views import history
from profiling.views.diff import diff_page
from profiling.vocabulary import MODE_PHASES, measured_span
from profiling.workload.spec import Workload
from tests.conftest import ascii_id
from tests.store.store_helpers import FIXTURES, OTHER_TRACE, TRACE, run_data, summary

TRAIN = "h200_train-naive_8_16_1024_64_bf16.json.gz"


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "runs.sqlite")


def _on(device: str, gpu_us: float, **config):
    """A run of the helpers' workload on `device` (the Summary's device name)."""
    data = run_data(gpu_us=gpu_us, **config)
    return dataclasses.replace(data, summary=summary(gpu_us, device=device))


# -- the store ---------------------------------------------------------------------------------
def test_a_first_opener_waits_for_a_writer_before_switching_to_wal(tmp_path):
    """Switching a new store to WAL needs the file's exclusive lock, and SQLite does not wait on
    the busy timeout for it while another connection holds the write lock (it would deadlock):
    the opener retries until the writer is done, never 'database is locked' (rare among
    sixteen first openers; forced here by holding a write transaction for 0.5 s)."""
    path = tmp_path / "runs.sqlite"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")  # ours, nothing migrated
    writer.execute("BEGIN IMMEDIATE")  # another opener's write lock, held
    released: list[float] = []

    def release() -> None:
        time.sleep(0.5)
        released.append(time.monotonic())
        writer.execute("COMMIT")

    waiter = threading.Thread(target=release)
    waiter.start()
    try:
        runs, total = query.list_runs(open_store(path))  # the first open: migrate, then WAL
        opened_at = time.monotonic()
    finally:
        waiter.join()
        writer.close()
    assert total == 0 and runs.empty
    assert released and released[0] <= opened_at  # it waited for the writer: order, not time
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_pruned_trace_recorded_again_is_kept_by_the_next_prune(store):
    """Re-recording a trace the cap pruned brings it back; the next prune (with room to spare)
    must not delete it while its new run's row says kept."""
    first = record(store, run_data())
    assert apply_cap(store, 0).traces == 1  # pruned: row kept, file gone
    digest = query.get_run(store, first.run_id)["trace_hash"]
    assert not trace_path(store.traces, digest).exists()
    again = record(store, run_data())
    assert query.get_run(store, again.run_id)["trace_hash"] == digest
    assert not apply_cap(store, 10**12)  # nothing over the cap
    assert trace_path(store.traces, digest).is_file()
    shown = history.history_view(query.list_runs(store)[0])
    assert shown.set_index("Run").loc[again.run_id, "Trace"] == "kept"
    assert history.stored_trace(store, query.get_run(store, again.run_id)).is_file()


def test_an_import_without_its_trace_marks_the_run_pruned(store, tmp_path):
    """An export whose traces folder did not come along: History says pruned, and no phantom
    bytes count against the cap."""
    made = record(store, run_data()).run_id
    exported = tmp_path / "out.jsonl"
    export_runs(store, exported)
    folder = exported.with_name("out.traces")
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    other = open_store(tmp_path / "other.sqlite")
    done = import_runs(other, exported)
    assert (done.added, done.traces) == (1, 0)
    listed = history.history_view(query.list_runs(other)[0])
    assert listed["Trace"].tolist() == ["pruned"]
    with pytest.raises(Exception, match="trace was pruned"):
        history.stored_trace(other, query.get_run(other, made))
    with sqlite3.connect(other.path) as connection:
        kept = connection.execute("SELECT coalesce(sum(bytes), 0) FROM traces WHERE pruned = 0")
        assert kept.fetchone()[0] == 0


def test_an_import_of_a_newer_stores_schema_is_refused(store, tmp_path):
    """A store written by a newer version may have columns this one would drop: refused."""
    record(store, run_data())
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(store.path) as source, sqlite3.connect(newer) as target:
        source.backup(target)
    with sqlite3.connect(newer) as connection:
        connection.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    other = open_store(tmp_path / "other.sqlite")
    with pytest.raises(StoreError, match=f"schema {schema.VERSION + 1}; this one reads up to"):
        import_runs(other, newer)
    assert query.list_runs(other)[1] == 0


# -- History's views ---------------------------------------------------------------------------
def test_the_trend_of_a_run_holds_only_its_own_devices_runs(store):
    h200 = [record(store, _on("NVIDIA H200", us)).run_id for us in (500.0, 505.0)]
    record(store, _on("NVIDIA H100", 900.0))  # the same workload on another GPU
    h200.append(record(store, _on("NVIDIA H200", 510.0)).run_id)
    points = history.trend_table(store, h200[-1])
    assert points["id"].tolist() == h200
    assert points["baseline_us"].tolist()[1:] == [500.0, 502.5]
    assert not points["regression"].any()


def test_compare_gives_each_runs_gpu_time_as_a_multiple_of_the_first(store):
    """GPU µs where the runs have it (their CPU µs are equal here), later ÷ first."""
    ids = [record(store, run_data(gpu_us=us)).run_id for us in (500.0, 1000.0, 250.0)]
    table = history.compare_runs(store, ids)
    assert table["Run"].tolist() == ids
    assert table["× first"].tolist() == [1.0, 2.0, 0.5]
    assert table["GPU µs"].tolist() == [500.0, 1000.0, 250.0]
    assert table["CPU µs"].tolist() == [80.0, 80.0, 80.0]


def test_compare_falls_back_to_cpu_time_where_a_run_has_no_gpu_time():
    runs = [{"id": "a", "created": 0.0, "cpu_us_median": 40.0, "gpu_us_median": None},
            {"id": "b", "created": 1.0, "cpu_us_median": 60.0, "gpu_us_median": None}]  # fmt: skip
    assert history.compare_view(runs)["× first"].tolist() == [1.0, 1.5]


def test_a_stored_diff_is_the_diff_of_its_traces_in_the_order_picked(store):
    run_a = record(store, run_data(trace=TRACE)).run_id
    run_b = record(store, run_data(trace=OTHER_TRACE, variant="naive")).run_id
    page = history.diff_runs(store, f"{run_a}, {run_b}")
    label_a, label_b = f"sdpa-math · {run_a[:6]}", f"naive · {run_b[:6]}"
    expected = diff_page(TRACE, OTHER_TRACE, label_a, label_b)
    pd.testing.assert_frame_equal(page.kernels, expected.kernels)
    pd.testing.assert_frame_equal(page.operators, expected.operators)
    assert page.headline == expected.headline


@pytest.mark.parametrize(
    ("raw", "at_least", "at_most", "said"),
    [
        ("one", 2, 50, "pick 2–50 different runs (got 1)"),
        ("one one", 2, 50, "pick 2–50 different runs (got 1)"),  # the same run twice is one
        (" ".join(f"r{i}" for i in range(51)), 2, 50, "pick 2–50 different runs (got 51)"),
        ("a b c", 2, 2, "pick two runs (got 3)"),
        ("a", 2, 2, "pick two runs (got 1)"),
    ],
    ids=ascii_id,  # a test id must read the same in a second pytest run in one process (mutmut)
)
def test_a_pick_of_too_few_or_too_many_runs_is_refused(raw, at_least, at_most, said):
    with pytest.raises(ConfigError, match=f"^{re.escape(said)}$"):
        history.picked_ids(raw, at_least, at_most)


def test_a_pick_at_its_bounds_is_taken():
    assert history.picked_ids("a, b", 2, 2) == ["a", "b"]
    assert history.picked_ids(["a", " b "], 2) == ["a", "b"]
    fifty = [f"r{i}" for i in range(50)]
    assert history.picked_ids(" ".join(fifty), 2) == fifty
    assert history.picked_ids("x", 1, 1) == ["x"]


def test_the_trend_figure_and_note_show_the_flagged_run(store):
    ids = [record(store, run_data(gpu_us=us)).run_id for us in (500.0, 505.0, 700.0)]
    points = history.trend_table(store, ids[-1])
    assert points["regression"].tolist() == [False, False, True]
    figure = history.trend_figure(points, "naive").figure()
    line, flagged, baseline = figure.data
    assert list(line.y) == [500.0, 505.0, 700.0] and list(line.text) == ids
    assert list(line.error_y.array) == [5.0, 5.0, 5.0]  # q3 − median: each run's IQR bar
    assert list(flagged.y) == [700.0] and list(flagged.x) == [history.when(points["created"][2])]
    assert list(baseline.y)[1:] == [500.0, 502.5]
    assert figure.layout.yaxis.title.text == "GPU µs per step (median)"
    note = history.trend_note(points)
    assert note.startswith(f"3 runs of this workload on this device. **Regressions:** `{ids[2]}`.")
    assert history.trend_note(points.iloc[:2]).startswith("2 runs of this workload on this "
                                                          "device. No regression.")  # fmt: skip


def test_the_kept_line_and_the_listing_note_say_where_runs_are(tmp_path):
    assert history.kept_html(["abc", None], ["one note"]) == (
        '<div class="ap-extra" id="kept">kept in History as run <a href="?run=abc">abc</a>'
        " · one note</div>"
    )
    assert history.kept_html([], []) == ""
    assert history.history_note(3, 3, None).startswith("The run store is off")
    store = open_store(tmp_path / "runs.sqlite")
    assert history.history_note(2, 5, store) == (
        f"5 stored runs match (the newest 2 listed). Store: `{store.path}`."
    )
    assert history.history_note(5, 5, store) == f"5 stored runs match. Store: `{store.path}`."


def test_compare_says_each_runs_iqr_and_leaves_a_run_without_times_blank():
    runs = [{"id": "a", "created": 0.0, "gpu_us_median": 100.0, "gpu_us_q1": 90.0,
             "gpu_us_q3": 130.0, "cpu_us_median": 5.0},
            {"id": "b", "created": 1.0, "gpu_us_median": None, "gpu_us_q1": None,
             "gpu_us_q3": None, "cpu_us_median": None}]  # fmt: skip
    table = history.compare_view(runs)
    assert table["GPU IQR µs"].tolist()[0] == 40.0 and pd.isna(table["GPU IQR µs"].tolist()[1])
    assert table["× first"].tolist()[0] == 1.0 and pd.isna(table["× first"].tolist()[1])
    assert history.compare_view([]).columns.tolist() == list(history.COMPARED.values())
    no_time = history.compare_view(runs[::-1])  # the first has no time: no multiples at all
    assert no_time["× first"].isna().all()


def test_the_cap_removes_stray_trace_files_once_they_are_old(store):
    """A trace file no row names (a write killed before its row) goes at the next cap, once
    older than a write may take; a young one may be a run being written, and stays."""
    import os

    kept = record(store, run_data()).run_id
    digest = query.get_run(store, kept)["trace_hash"]
    old, young = trace_path(store.traces, "0" * 64), trace_path(store.traces, "1" * 64)
    for stray in (old, young):
        stray.write_bytes(b"x")
    os.utime(old, (1.0, 1.0))
    assert not apply_cap(store, 10**12)
    assert not old.exists() and young.exists()
    assert trace_path(store.traces, digest).is_file()  # the kept run's trace stays
    with pytest.raises(ValueError, match="the cap must be 0 or more bytes, not -1"):
        apply_cap(store, -1)


def test_a_pruned_trace_whose_file_is_already_gone_is_no_error(store):
    run_id = record(store, run_data()).run_id
    trace_path(store.traces, query.get_run(store, run_id)["trace_hash"]).unlink()
    assert apply_cap(store, 0).traces == 1  # marked pruned; its missing file is not an error
    assert history.history_view(query.list_runs(store)[0])["Trace"].tolist() == ["pruned"]


def test_a_text_filter_of_200_characters_is_taken_and_201_refused_by_name():
    assert query.checked_filters(variant="v" * 200).variant == "v" * 200
    with pytest.raises(ConfigError, match=r"^shape must be text of at most 200 characters, not "):
        query.checked_filters(shape="s" * 201)
    with pytest.raises(ConfigError, match=r"^since must be a date as YYYY-MM-DD, not 'May 1'$"):
        query.checked_filters(since="May 1")


def test_the_prune_message_gives_the_cap_and_what_went_in_gb_and_mb():
    from profiling.store.traces import Pruned

    said = Pruned(traces=2, bytes=3_500_000, runs=3, cap=2_000_000_000).message()
    assert said == (
        "the run store's traces passed their size cap (2.00 GB): the 2 oldest (3.5 MB, of 3 "
        "runs) were deleted; those runs are kept, marked 'trace pruned'"
    )


def test_each_run_is_kept_in_its_own_transaction_and_a_refusal_is_said(tmp_path, caplog):
    """A run the store cannot take (no variant: the runs table refuses it) is not stored and
    said; the runs after it are kept; the rows' cap's note follows, once."""
    store = open_store(tmp_path / "runs.sqlite", max_runs=1)
    broken = dataclasses.replace(run_data(), config={})
    with caplog.at_level("WARNING", logger="profiling.store.hooks"):
        kept = hooks.keep([broken, run_data(), run_data()], store)
    assert kept.ids[0] is None and all(kept.ids[1:]) and len(kept.ids) == 3
    said = "NOT NULL constraint failed: runs.variant"
    assert kept.notes[0].startswith(f"not stored: the run store {store.path}")
    assert said in kept.notes[0]
    assert kept.notes[1:] == [runs_cap_message(1, 1)]
    logged = [r.getMessage() for r in caplog.records if r.name == "profiling.store.hooks"]
    assert len(logged) == 1 and logged[0].startswith(f"run store {store.path}: the run store")


def test_the_default_store_is_the_one_the_environment_names(tmp_path, monkeypatch, caplog):
    path = tmp_path / "env.sqlite"
    monkeypatch.setenv("ATTNPROF_STORE", str(path))
    (run_id,) = hooks.keep([run_data()]).ids
    assert query.get_run(open_store(path), run_id)["id"] == run_id
    monkeypatch.setenv("ATTNPROF_STORE_MAX_BYTES", "lots")
    with pytest.raises(ValueError) as bad_cap:
        open_store()
    with caplog.at_level("WARNING", logger="profiling.store.hooks"):
        refused = hooks.keep([run_data()])
    assert (refused.ids, refused.notes) == ([], [f"not stored: {bad_cap.value}"])
    assert [record.getMessage() for record in caplog.records] == [f"run store: {bad_cap.value}"]
    monkeypatch.delenv("ATTNPROF_STORE_MAX_BYTES")
    monkeypatch.setenv("ATTNPROF_STORE", "off")
    assert hooks.keep([run_data(), run_data()]).ids == [None, None]  # storing off: none kept
    assert hooks.keep([run_data(), run_data()], None).ids == [None, None]
    assert hooks.keep([run_data()], str(path)).ids == [None]  # a path is not an opened store


def test_a_training_runs_kernels_are_kept_per_phase_and_its_views_computed_when_not_given(
    tmp_path,
):
    """A train trace's kernel table as the page lists it: each phase's rows, the phase
    named, one index; a forward's is its one table. The roles and roofline a caller does not
    pass are computed (the CLI's runs), not left out."""
    train = run_trace.read(str(FIXTURES / TRAIN), measured_span("train"), MODE_PHASES["train"])
    phases = train.phases
    kernels = hooks._phase_kernels(types.SimpleNamespace(trace=train, kernels=train.kernels))
    assert list(kernels["phase"].unique()) == list(phases) and len(phases) == 2
    assert len(kernels) == sum(len(phase.kernels) for phase in phases.values()) > 0
    assert kernels.index.equals(pd.RangeIndex(len(kernels)))
    forward = run_trace.read(str(TRACE), measured_span("forward"), MODE_PHASES["forward"])
    alone = types.SimpleNamespace(trace=forward, kernels=forward.kernels)
    assert hooks._phase_kernels(alone) is forward.kernels
    small = Workload(variant="naive", seq_len=64, batch=1, heads=2, head_dim=16,
                     dtype="float32", mode="train", steps=1, device="cpu")  # fmt: skip
    result = run(small, out_dir=tmp_path)
    data = hooks.profile_run(result, "cli")
    assert list(data.roles.columns) and list(data.roofline.columns)  # computed, empty on a CPU
    assert (data.kind, data.origin, data.status) == ("profile", "cli", "ok")
    assert data.config == result.config.as_dict() and data.summary == result.summary.as_dict()
    assert data.trace_gz == Path(result.trace_gz) and data.trace_gz.is_file()
    assert data.operators is result.operators and "phase" in data.kernels.columns
    given = hooks.profile_run(run(small, out_dir=tmp_path), "app", [{"role": "x"}], [{"k": 1}])
    assert given.roles.to_dict("records") == [{"role": "x"}]
    assert given.roofline.to_dict("records") == [{"k": 1}]
