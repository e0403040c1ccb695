"""Issue 41 (mutmut): what History shows, pinned where a mutant of views/history.py changed it
and no test noticed: the trend figure as drawn (its traces, colours, axis titles, an empty
and a CPU trend), the listing's and Compare's columns and rounding, the words of a pick
refused, a stored run's download name and Summary, a stored trace read as an upload is, and
a stored Diff's labels. Real stores and fixture traces; each test was seen failing with its
mutant applied by hand."""

from __future__ import annotations

import dataclasses
import math
import re

import pandas as pd
import pytest

from profiling.analysis.summary import Summary
from profiling.run import trace as run_trace
from profiling.store import open_store, query
from profiling.store.trend import trend
from profiling.store.write import record
from profiling.trace.events import TraceError
from profiling.user_values import ConfigError
from profiling.views import history
from profiling.views import shared as views_shared
from profiling.views.diff import diff_page
from profiling.vocabulary import MODE_PHASES, measured_span
from tests.store.store_helpers import OTHER_TRACE, TRACE, run_data, summary


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "runs.sqlite")


TRAIN = "h200_train-naive_8_16_1024_64_bf16.json.gz"


def _no_nan(value):
    """The spec with NaN as None, so that two specs compare with ==."""
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


# -- the trend figure ---------------------------------------------------------------------------
def test_the_trend_figure_is_the_medians_their_iqr_the_flagged_run_and_the_baseline(store):
    """Every key of the spec the page draws: plotly is told not to validate it, so a key
    misspelt there is a trace or an axis title silently gone."""
    ids = [record(store, run_data(gpu_us=us)).run_id for us in (500.0, 505.0, 700.0)]
    points = history.trend_table(store, ids[-1])
    x = [history.when(t) for t in points["created"]]
    spec = history.trend_figure(points, "sdpa-math B8 H16")
    assert _no_nan(spec.data) == [
        {"type": "scatter", "mode": "lines+markers", "name": "median (IQR bars)", "x": x,
         "y": [500.0, 505.0, 700.0], "text": ids,
         "error_y": {"type": "data", "symmetric": False, "array": [5.0, 5.0, 5.0],
                     "arrayminus": [5.0, 5.0, 5.0]}},
        {"type": "scatter", "mode": "markers", "name": "regression", "x": [x[2]], "y": [700.0],
         "marker": {"color": "#d62728", "size": 14, "symbol": "x"}},
        {"type": "scatter", "mode": "lines", "name": "median of earlier runs", "x": x,
         "y": [None, 500.0, 502.5], "line": {"dash": "dot"}},
    ]  # fmt: skip
    assert spec.layout == {
        "title": {"text": "sdpa-math B8 H16"}, "xaxis": {"title": {"text": "run (UTC)"}},
        "yaxis": {"title": {"text": "GPU µs per step (median)"}}, "height": 380,
        "legend": {"orientation": "h"},
    }  # fmt: skip


def test_a_trend_with_an_asymmetric_spread_draws_each_side_of_its_bar():
    runs = pd.DataFrame({"id": ["a"], "created": [0.0], "device_kind": ["cuda"],
                         "gpu_us_median": [100.0], "gpu_us_q1": [90.0], "gpu_us_q3": [130.0],
                         "cpu_us_median": [5.0], "cpu_us_q1": [5.0],
                         "cpu_us_q3": [5.0]})  # fmt: skip
    error = history.trend_figure(trend(runs), "one").data[0]["error_y"]
    assert (error["array"], error["arrayminus"]) == ([30.0], [10.0])


def test_a_cpu_trend_says_cpu_and_an_empty_one_gpu():
    runs = pd.DataFrame({"id": ["a", "b"], "created": [0.0, 1.0], "device_kind": ["cpu"] * 2,
                         "gpu_us_median": [None, None], "gpu_us_q1": [None, None],
                         "gpu_us_q3": [None, None], "cpu_us_median": [40.0, 41.0],
                         "cpu_us_q1": [39.0, 40.0], "cpu_us_q3": [42.0, 43.0]})  # fmt: skip
    for shown in (runs, runs.iloc[:1]):  # one point is a trend too
        spec = history.trend_figure(trend(shown), "cpu")
        assert spec.layout["yaxis"]["title"]["text"] == "CPU µs per step (median)"
        assert spec.data[0]["y"] == shown["cpu_us_median"].tolist()
    empty = history.trend_figure(trend(runs.iloc[:0]), "none")
    assert empty.layout["yaxis"]["title"]["text"] == "GPU µs per step (median)"
    assert [trace["x"] for trace in empty.data] == [[], [], []]


def test_a_runs_time_is_said_in_utc_whatever_the_servers_zone(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert history.when(0.0) == "1970-01-01 00:00:00"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_trend_note_lists_every_flagged_run():
    points = pd.DataFrame({"id": ["a", "b", "c"], "regression": [False, True, True]})
    assert history.trend_note(points).startswith(
        "3 runs of this workload on this device. **Regressions:** `b`, `c`."
    )


# -- the listing and Compare --------------------------------------------------------------------
def test_the_listing_shows_the_time_the_iqr_and_each_number_rounded(store):
    data = dataclasses.replace(run_data(), summary={**summary(), "tflops": 123.45678,
                                                    "peak_mib": 2048.26})  # fmt: skip
    run_id = record(store, data).run_id
    runs = query.list_runs(store)[0]
    row = history.history_view(runs).iloc[0].to_dict()
    assert row["Run"] == run_id and row["When (UTC)"] == history.when(runs["created"][0])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row["When (UTC)"])
    assert (row["GPU µs"], row["GPU IQR µs"], row["CPU µs"]) == (500.0, 10.0, 80.0)
    assert (row["TFLOP/s"], row["Peak MiB"]) == (123.457, 2048.3)


def test_compare_shows_when_each_run_ran_and_rounds_its_figures():
    runs = [{"id": "a", "created": 0.0, "gpu_us_median": 300.0, "gpu_us_q1": 290.0,
             "gpu_us_q3": 310.04, "cpu_us_median": 5.0, "peak_mib": 10.26},
            {"id": "b", "created": 86_400.0, "gpu_us_median": 100.04, "gpu_us_q1": None,
             "gpu_us_q3": 101.0, "cpu_us_median": 5.0}]  # fmt: skip
    table = history.compare_view(runs)
    assert table["When (UTC)"].tolist() == ["1970-01-01 00:00:00", "1970-01-02 00:00:00"]
    assert table["GPU µs"].tolist() == [300.0, 100.0] and table["Peak MiB"][0] == 10.3
    assert table["GPU IQR µs"][0] == 20.0 and pd.isna(table["GPU IQR µs"][1])  # q1 missing
    assert table["× first"].tolist() == [1.0, 0.333]


def test_compare_gives_no_multiple_of_a_first_run_that_took_no_time():
    runs = [{"id": "a", "created": 0.0, "gpu_us_median": 0.0},
            {"id": "b", "created": 1.0, "gpu_us_median": 5.0}]  # fmt: skip
    assert history.compare_view(runs)["× first"].isna().all()


def test_compare_takes_two_runs_and_says_what_a_pick_was_for(store):
    ids = [record(store, run_data(gpu_us=us)).run_id for us in (500.0, 250.0)]
    assert history.compare_runs(store, ids)["× first"].tolist() == [1.0, 0.5]
    with pytest.raises(ConfigError, match=r"^pick 2–50 different runs to compare \(got 1\)$"):
        history.compare_runs(store, ids[:1])


def test_the_listing_note_on_the_page_names_the_store_by_its_file_only(store):
    assert history.store_name(store, False) == "runs.sqlite"
    assert history.store_name(store) == str(store.path)  # the CLI's: its path
    assert history.history_note(1, 1, store, full_path=False) == (
        "1 stored runs match. Store: `runs.sqlite`."
    )


def test_an_id_the_store_did_not_make_is_escaped_not_code():
    assert history.id_markdown("abc_DEF-9") == "`abc_DEF-9`"
    assert history.id_markdown("a*b") == history.escape_markdown("a*b") != "`a*b`"


# -- a stored run reopened ----------------------------------------------------------------------
def test_a_stored_runs_download_is_named_by_its_tag_and_id(store):
    run = query.get_run(store, record(store, run_data(device="auto")).run_id)
    tag = "sdpa-math_8_16_1024_64_bfloat16_causal_cuda_3steps"  # where it ran, not "auto"
    assert (run["device"], run["device_kind"]) == ("auto", "cuda")
    assert history.download_name(run) == f"{tag}_{run['id'][:8]}".rstrip(".-") + ".json.gz"
    cpu = {**run, "id": "ABCDEFGX" + run["id"][8:], "device_kind": None, "device": "cpu"}
    assert history.download_name(cpu) == tag.replace("cuda", "cpu") + "_ABCDEFGX.json.gz"


def test_a_download_name_is_trimmed_to_safe_characters_and_150_of_them():
    run = {"id": "Zz9-.", "variant": "<" + "v" * 200}  # no shape: the tag is "run"
    assert history.download_name(run) == "run_Zz9.json.gz"
    shaped = {**run, **{k: 1 for k in ("batch", "heads", "head_dim", "seq_len", "steps")},
              "dtype": "f32", "causal": True, "device": "cpu"}  # fmt: skip
    named = history.download_name(shaped)
    assert named == "v" * 150 + ".json.gz"  # the leading '-' stripped, then 150 kept


def test_a_stored_summary_is_the_summary_shown_less_what_a_newer_version_added(store):
    data = dataclasses.replace(run_data(), summary={**summary(), "added_later": 1})
    run = query.get_run(store, record(store, data).run_id)
    kept = history.stored_summary(run)
    assert isinstance(kept, Summary) and kept.device_name == "NVIDIA H200"
    assert kept.gpu_us_per_forward == 500.0 and kept.tflops == 123.4
    failed = dataclasses.replace(run_data(trace=None), status="failed", reason="out of memory",
                                 summary=None)  # fmt: skip
    not_run = query.get_run(store, record(store, failed).run_id)
    with pytest.raises(TraceError, match=rf"^run {not_run['id']} did not run "
                                         r"\(failed: out of memory\)$"):  # fmt: skip
        history.stored_summary(not_run)


@pytest.mark.parametrize(("mode", "path"), [("forward", TRACE), ("train", TRACE.with_name(TRAIN))])
def test_a_stored_trace_is_read_in_the_worker_as_its_run_read_it(mode, path):
    """By its run's mode: a training step's span and both its phases."""
    path = str(path)
    figures = history.stored_trace_figures(path, mode, "a title")
    read = run_trace.read(path, measured_span(mode), MODE_PHASES[mode])
    pd.testing.assert_frame_equal(figures.kernels, read.kernels)
    mine, theirs = figures.launch_stats(), read.launch_stats()
    assert (mine.scope, mine.busy_us, mine.launches) == (theirs.scope, theirs.busy_us,
                                                         theirs.launches)  # fmt: skip
    pd.testing.assert_frame_equal(mine.devices, theirs.devices)
    pd.testing.assert_frame_equal(figures.roles(), read.roles())
    assert figures.gantt().layout == read.gantt("a title").layout
    assert set(figures.phases) == set(read.phases) == set(MODE_PHASES[mode])
    for name in MODE_PHASES[mode]:
        pd.testing.assert_frame_equal(figures.phases[name].kernels, read.phases[name].kernels)
    assert figures.launch_stats().forwards == read.launch_stats().forwards


def test_a_stored_trace_is_refused_by_mode_presence_and_the_upload_limits(tmp_path,
                                                                          monkeypatch):  # fmt: skip
    with pytest.raises(TraceError, match=r"^the stored run's mode 'sideways' is not one this"):
        history.stored_trace_figures(str(TRACE), "sideways", "t")
    with pytest.raises(TraceError, match=r"^the stored trace: cannot open the upload"):
        history.stored_trace_figures(str(tmp_path / "gone.json.gz"), "forward", "t")
    with pytest.raises(ConfigError, match=r"^the stored trace is missing$"):
        history.stored_trace_figures("", "forward", "t")
    size = TRACE.stat().st_size  # 11,716 bytes: "11 KiB"
    monkeypatch.setattr(views_shared, "TRACE_MAX_UPLOAD_BYTES", size)
    history.stored_trace_figures(str(TRACE), "forward", "t")  # at the limit: read
    monkeypatch.setattr(views_shared, "TRACE_MAX_UPLOAD_BYTES", 10 * 1024)
    with pytest.raises(TraceError, match=r"^the stored trace is 11 KiB; the limit is 10 KiB$"):
        history.stored_trace_figures(str(TRACE), "forward", "t")
    monkeypatch.setattr(views_shared, "TRACE_MAX_UPLOAD_BYTES", 10**9)
    monkeypatch.setattr(views_shared, "TRACE_MAX_EXPANDED_BYTES", 4096)
    with pytest.raises(TraceError, match="expands to more than"):
        history.stored_trace_figures(str(TRACE), "forward", "t")


def test_a_stored_diff_in_the_worker_is_its_two_traces_under_their_labels(tmp_path):
    page = history.diff_stored(str(TRACE), str(OTHER_TRACE), "sdpa-math · a", "naive · b")
    expected = diff_page(TRACE, OTHER_TRACE, "sdpa-math · a", "naive · b")
    pd.testing.assert_frame_equal(page.kernels, expected.kernels)
    assert page.headline == expected.headline and "naive · b" in page.headline
    gone = str(tmp_path / "gone.json.gz")
    with pytest.raises(TraceError, match=r"^trace A: cannot open"):
        history.diff_stored(gone, str(OTHER_TRACE), "a", "b")
    with pytest.raises(TraceError, match=r"^trace B: cannot open"):
        history.diff_stored(str(TRACE), gone, "a", "b")


def test_a_stored_diff_says_why_a_run_has_no_trace_to_open(store):
    """A run that did not run, one whose trace the cap pruned (its row says so, even where a
    file by that hash lingers), one whose file is gone: each named, with what to do instead."""
    kept = query.get_run(store, record(store, run_data()).run_id)
    assert history.stored_trace(store, kept).is_file()
    refused = dataclasses.replace(run_data(trace=None), status="unavailable", summary=None)
    never = query.get_run(store, record(store, refused).run_id)
    with pytest.raises(TraceError) as said:
        history.stored_trace(store, never)
    assert str(said.value) == f"run {never['id']} has no trace: it did not run (unavailable)"
    pruned_text = (
        f"run {kept['id']}'s trace was pruned (the store's size cap); its stored figures remain: "
        "select it with another run for a Compare table instead"
    )
    for row in ({**kept, "trace_pruned": 1}, {**kept, "trace_hash": "0" * 64}):
        with pytest.raises(TraceError) as said:
            history.stored_trace(store, row)
        assert str(said.value) == pruned_text


def test_a_run_not_in_the_store_is_named_with_the_stores_file_name_only(store):
    with pytest.raises(ConfigError) as said:
        history.stored_run(store, "nosuchrun")
    assert str(said.value) == "run 'nosuchrun' is not in this run store (runs.sqlite)"
