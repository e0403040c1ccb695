"""The run's plain-Python trace path (profiling.run.records) agrees with the trace model.

A run reads its own trace once (profiling.run.trace), as records where it can, and the views
read the same figures, kernel table, launch statistics, Compare timeline and Gantt as if the
vectorised path had made them: every fixture, live CPU runs and (in test_gpu.py) every GPU run
are checked value for value, and traces the small path does not take are left to the model.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import pickle
from pathlib import Path

import pandas as pd
import pytest

from profiling.analysis.launch import LaunchStats, launch_stats
from profiling.analysis.summary import forward_work, per_forward
from profiling.gantt.spec import gantt_spec
from profiling.jobs import compare
from profiling.kernels.names import kernel_table
from profiling.run import gantt_records
from profiling.run import records as small_trace
from profiling.run import trace as run_trace
from profiling.run.runner import run
from profiling.trace import model as trace
from profiling.trace.events import TraceError, span_args
from profiling.views import profile as views_profile
from profiling.workload.spec import Workload
from tests.conftest import FIXTURES

COLUMNS = {  # spans table column → Span attribute
    "start_us": "start", "dur_us": "dur", "end_us": "end", "depth": "depth",
    "parent": "parent", "self_us": "self_us", "correlation": "correlation", "link": "link",
    "step": "step", "name": "name", "category": "category", "cat": "cat", "pid": "pid",
    "tid": "tid",
}  # fmt: skip


def assert_paths_agree(path: Path, title: str = "run <b>title</b>") -> None:
    """Everything a run takes from its trace is the same on both paths, to the last bit."""
    model = trace.load(path)
    small = small_trace.read(path)
    assert small is not None, f"{path.name}: the small path declined a run's trace"
    assert small.lanes == model.lanes
    spans = model.spans
    assert len(small.spans) == len(spans)
    for column, attr in COLUMNS.items():
        expected = [str(v) if isinstance(v, str) else v for v in spans[column].tolist()]
        assert [getattr(s, attr) for s in small.spans] == expected, column
    assert [spans["lane"].cat.categories.get_loc(v) for v in spans["lane"]] == [
        s.lane for s in small.spans
    ]
    assert [span_args(s.args) for s in small.spans] == [span_args(a) for a in spans["args"]]
    windows, work = forward_work(model)
    s_windows, s_work = small_trace.forward_work(small)
    assert [s.index for s in s_windows] == windows.index.tolist()
    assert [s.index for s in s_work] == work.index.tolist()
    per = max(len(windows), 1)
    for own_run in (False, True):  # an upload's reading, and a run's with this app's context
        stats = per_forward(model, windows=windows, work=work, own_run=own_run)
        small_stats = small_trace.per_forward(small, s_windows, s_work, own_run=own_run)
        assert repr(small_stats) == repr(stats)  # NaN == NaN
        pd.testing.assert_frame_equal(
            small_trace.kernel_table(s_work, per, own_run=own_run),
            kernel_table(work, per, own_run=own_run),
        )
    figure = gantt_records.gantt(small, title)
    assert figure.to_json() == gantt_spec(spans, model.lanes, title=title).to_json()
    columns = small_trace.span_columns(small)
    pd.testing.assert_frame_equal(columns, spans[list(columns.columns)])
    assert_runs_agree(run_trace.of_records(small), run_trace.of_table(model), model, title)


def assert_runs_agree(
    records: run_trace.RunTrace, table: run_trace.RunTrace, model: trace.Trace, title: str
) -> None:
    """A run's trace object gives the same page and Compare row from either reader, and its
    launch statistics are those the page computed from the spans table before (one read)."""
    assert (records.reader, table.reader) == (run_trace.RECORDS, run_trace.TABLE)
    assert records.lanes == table.lanes == model.lanes
    assert repr(records.stats) == repr(table.stats)
    pd.testing.assert_frame_equal(records.kernels, table.kernels)
    expected = launch_stats(model)
    assert_launch_equal(records.launch_stats(), expected)
    assert_launch_equal(table.launch_stats(), expected)
    pd.testing.assert_frame_equal(
        compare.timeline(records.columns()), compare.timeline(model.spans)
    )
    assert records.gantt(title).to_json() == table.gantt(title).to_json()


def assert_launch_equal(got: LaunchStats, expected: LaunchStats) -> None:
    for item in dataclasses.fields(LaunchStats):
        mine, theirs = getattr(got, item.name), getattr(expected, item.name)
        if isinstance(theirs, pd.DataFrame):
            pd.testing.assert_frame_equal(mine, theirs, check_exact=True, obj=item.name)
        else:
            assert repr(mine) == repr(theirs), item.name  # NaN == NaN, 1.0 != 1


RUN_FIXTURES = sorted(p for p in FIXTURES.glob("*.json.gz") if "_user-" not in p.name)


@pytest.mark.parametrize("path", RUN_FIXTURES, ids=lambda p: p.name[:-8])
def test_every_h200_fixture_reads_the_same_on_both_paths(path):
    assert_paths_agree(path)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*_user-*.json.gz")), ids=lambda p: p.name)
def test_a_trace_with_recorded_shapes_is_left_to_the_model(path):
    """A user's trace recorded with record_shapes (never a run's own) goes to the trace model,
    whose CPU ops keep their "Input Dims" for the roles and the roofline."""
    assert small_trace.read(path) is None
    spans = trace.load(path).spans
    assert any("Input Dims" in span_args(a) for a in spans["args"])


@pytest.mark.parametrize("variant", ["naive", "naive-inplace", "sdpa-math", "sdpa-auto"])
@pytest.mark.parametrize("causal", [True, False])
def test_live_cpu_runs_read_the_same_on_both_paths(variant, causal, tmp_path):
    config = Workload.from_user(variant=variant, device="cpu", batch=1, heads=2, seq_len=128,
                                 head_dim=32, dtype="float32", causal=causal)  # fmt: skip
    result = run(config, out_dir=tmp_path)
    assert result.trace.reader == run_trace.RECORDS  # a run's own trace: the fast reader
    assert_paths_agree(result.trace_json, views_profile.run_title(result.summary))
    model = trace.load(result.trace_json)
    page = views_profile.page(result)  # what the page shows, from the run's one read
    assert page.summary["launch"] == views_profile.launch_json(launch_stats(model))
    title = views_profile.run_title(result.summary)
    assert page.figure.to_json() == gantt_spec(model.spans, model.lanes, title=title).to_json()


def test_the_page_and_a_compare_row_need_no_trace_file(tmp_path):
    """The trace is read once, in the run: once its files are gone (the app keeps the last few
    runs' folders) the page and Compare's row still come, from that read, across a pickle."""
    config = Workload.from_user(variant="naive", device="cpu", batch=1, heads=1, seq_len=64,
                                 head_dim=16, dtype="float32")  # fmt: skip
    result = run(config, out_dir=tmp_path)
    with gzip.open(result.trace_gz) as fh:
        assert json.load(fh)["traceEvents"]  # written on its thread, complete when run returns
    model = trace.load(result.trace_json)
    result.trace_json.unlink()
    result.trace_gz.unlink()
    result = pickle.loads(pickle.dumps(result))  # as it leaves a ZeroGPU worker
    page = views_profile.page(result)
    assert page.summary["launch"] == views_profile.launch_json(launch_stats(model))
    row = compare.from_profile(result)
    pd.testing.assert_frame_equal(row.timeline, compare.timeline(model.spans))
    assert_launch_equal(row.launch, launch_stats(model))


def _write(tmp_path: Path, events: list, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def X(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


STEPS = [X("ProfilerStep#3", 0, 100, cat="user_annotation"),
         X("attn_fwd", 5, 50, cat="user_annotation")]  # fmt: skip


@pytest.mark.parametrize(
    "events",
    [
        [*STEPS, X("a", 10, 30), X("b", 20, 40)],  # b crosses a's end: the model renests
        [*STEPS, X("a", 10, None)],  # no duration: the model counts it as skipped
        [*STEPS, X(7, 10, 5)],  # a numeric name: the model's lenient path
        [*STEPS, {**X("a", 10, 5), "ts": "10"}],  # a string ts: the lenient path too
        [],  # nothing recorded: the model says so
        [*STEPS, X("a", 10, 5, tid="02")],  # the model reads it as thread 2
        [*STEPS, X("a\0", 10, 5)],  # numpy drops a trailing NUL in the model's names
        [*STEPS, X("k", 10, 5, cat="kernel\0", pid=0, tid=7)],
    ],
    ids=[
        "crossing",
        "no-dur",
        "numeric-name",
        "string-ts",
        "empty",
        "string-tid",
        "nul-name",
        "nul-cat",
    ],
)
def test_traces_outside_a_runs_shape_are_left_to_the_model(events, tmp_path):
    assert small_trace.read(_write(tmp_path, events)) is None


def test_a_big_or_unreadable_trace_is_left_to_the_model(tmp_path, monkeypatch):
    path = _write(tmp_path, [*STEPS, X("a", 10, 5), X("b", 20, 5)])
    assert small_trace.read(path) is not None
    monkeypatch.setattr(small_trace, "MAX_EVENTS", 3)
    assert small_trace.read(path) is None
    assert small_trace.read(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert small_trace.read(tmp_path / "bad.json") is None
    deep = tmp_path / "deep.json"
    nested = "[" * 50_000 + "]" * 50_000  # valid JSON, deeper than the decoders recurse
    deep.write_text(f'{{"traceEvents": {json.dumps([X("a", 0, 1)])}, "x": {nested}}}')
    with pytest.raises(TraceError, match="nested too deeply"):
        trace.load(deep)
    assert small_trace.read(deep) is None


@pytest.mark.parametrize("limit", ["DETAIL_LIMIT", "MAX_ROWS"])
def test_a_trace_the_records_cannot_draw_is_read_as_the_table(limit, tmp_path, monkeypatch):
    """More spans than one bar each, or more Gantt rows than the limit: the records reader
    declines it whole, and the run's trace object draws the model's figure (its level of
    detail, its row cut) from the same one read."""
    events = [*STEPS, X("a", 10, 5), X("b", 20, 5), X("c", 21, 2), X("d", 30, 1, tid=2)]
    path = _write(tmp_path, events)
    assert small_trace.read(path) is not None and run_trace.read(path).reader == "records"
    monkeypatch.setattr(small_trace, limit, 3)  # 6 spans in 4 rows
    assert small_trace.read(path) is None
    read = run_trace.read(path)
    model = trace.load(path)
    assert read.reader == run_trace.TABLE
    assert read.gantt("t").to_json() == gantt_spec(model.spans, model.lanes, title="t").to_json()
    assert_launch_equal(read.launch_stats(), launch_stats(model))


def test_time_zero_and_a_trace_without_forwards_agree(tmp_path):
    """Of 0.0 and -0.0 the zero is numpy's pick, as the model's; with no attn_fwd and no step
    the CPU µs per forward is NaN on both paths."""
    assert_paths_agree(_write(tmp_path, [X("a", 0.0, 1), X("b", -0.0, 1, tid=2)]))
    assert_paths_agree(_write(tmp_path, [X("b", -0.0, 1, tid=2), X("a", 0.0, 1)], "2.json"))


def test_nested_threads_and_streams_agree(tmp_path):
    """Two CPU threads (one named), a GPU stream with an annotation lane, launches linked by
    correlation (an id launched twice and one run twice: the first of each counts), a kernel
    outside any step, ties in start time, zero durations, an end within the 2 ns tolerance of
    the next start, and two kernels tied for the most time (the first sorted name wins)."""
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "worker"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "H200"}},
        *STEPS,
        X("ProfilerStep#4", 120, 50, cat="user_annotation"),
        X("aten::mm", 10, 20.0015), X("aten::mm", 10, 20), X("aten::empty", 12, 0),
        X("aten::add", 30, 5),  # starts 1.5 ns before the first mm ends: not inside it
        X("cudaLaunchKernel", 15, 3, cat="cuda_runtime", correlation=11),
        X("cudaLaunchKernel", 31, 1, cat="cuda_runtime", correlation=11),
        X("cudaLaunchKernel", 40, 2, cat="cuda_runtime", correlation=13),
        X("cudaLaunchKernel", 130, 3, cat="cuda_runtime", tid=2, correlation=12),
        X("aten::add", 125, 20, tid=2),
        X("zz_gemm_kernel", 40, 30, cat="kernel", pid=0, tid=7, correlation=11,
          grid=[1, 2, 3], block=[128, 1, 1]),
        X("aa_gemm_kernel", 75, 30, cat="kernel", pid=0, tid=7, correlation=13),
        X("elementwise_kernel", 140, 5, cat="kernel", pid=0, tid=7, correlation=12),
        X("elementwise_kernel", 150, 5, cat="kernel", pid=0, tid=7, correlation=12),
        X("Memcpy DtoD", 200, 4, cat="gpu_memcpy", pid=0, tid=7, correlation=99),
        X("attn_fwd", 38, 40, cat="gpu_user_annotation", pid=0, tid=7),
    ]  # fmt: skip
    path = _write(tmp_path, events)
    assert_paths_agree(path)
    spans = trace.load(path).spans
    named = lambda name: spans[spans["name"] == name]  # noqa: E731
    launches = named("cudaLaunchKernel").index[named("cudaLaunchKernel")["correlation"] == 11]
    assert named("zz_gemm_kernel")["link"].tolist() == [launches[0]] and len(launches) == 2
    add, mm = named("aten::add"), named("aten::mm")
    assert add.loc[add["tid"] == "1", "depth"].tolist() == [mm["depth"].min()]  # a sibling


def test_a_cpu_only_trace_agrees(tmp_path):
    """No GPU: the dominant operator is the one with the most self time, ties to the first
    name in sorted order."""
    events = [*STEPS, X("b_op", 6, 10), X("a_op", 20, 10), X("a_op::inner", 21, 4)]
    path = _write(tmp_path, events)
    assert_paths_agree(path)
    stats = small_trace.per_forward(small_trace.read(path), *small_trace.forward_work(
        small_trace.read(path)))  # fmt: skip
    assert stats.gpu_us is None and stats.dominant == "b_op"
