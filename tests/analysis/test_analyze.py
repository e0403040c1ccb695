"""Analyse an uploaded trace: H200 fixtures, a CPU-only trace, uploads that are not traces."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from profiling.analysis.analyze import CPU_ONLY, analyze
from profiling.analysis.columns import KERNEL_COLUMNS, TRACE_OPERATOR_COLUMNS
from profiling.trace.events import TraceError
from profiling.views.roofline_figure import roofline_spec
from tests.conftest import CUDNN, NAIVE

MiB = 1024**2


def test_naive_fixture_tables_and_summary():
    result = analyze(NAIVE)
    assert result.has_gpu and result.name == NAIVE.name
    assert list(result.operators.columns) == list(TRACE_OPERATOR_COLUMNS)
    ops = result.operators.set_index("operator")
    assert ops.loc["aten::bmm", "calls"] == 6  # two matmuls per forward, 3 forwards
    assert ops.loc["aten::bmm", "self_us"] <= ops.loc["aten::bmm", "total_us"]
    assert result.operators["pct_self"].sum() == pytest.approx(100)
    # kernels per forward, warm-up leftovers excluded: 5 kernels + Memcpy + Memset, once each
    assert list(result.kernels.columns) == list(KERNEL_COLUMNS)
    assert len(result.kernels) == 7 and (result.kernels["count"] == 1).all()
    assert "per forward" in result.kernel_scope
    rows = dict(result.summary)
    assert rows["device 0"].startswith("NVIDIA H200 (sm_90, 132 SMs")
    assert rows["GPU µs / forward"] == "1,065.1" and rows["bound"].startswith("GPU-bound")
    assert rows["GPU busy"].startswith("99.1%")
    assert "171 spans in 3 lanes (2 GPU)" in rows["events"]
    assert result.n_spans == len(result.spans) == 171 and len(result.lanes) == 3


def test_cudnn_fixture_from_bytes_is_cpu_bound():
    result = analyze(CUDNN.read_bytes())
    rows = dict(result.summary)
    assert result.name == "uploaded trace"
    assert rows["SDPA backend"] == "cudnn" and rows["bound"].startswith("CPU-bound")
    assert result.launch.per_kernel["launch_api"].tolist() == [
        "cudaMemsetAsync",
        "cuLaunchKernelEx",
    ]


def test_cpu_only_trace_is_analysed_not_refused(tmp_path):
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 50,
         "pid": 1, "tid": 1},
        {"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "ts": 1, "dur": 40, "pid": 1,
         "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 2, "dur": 30, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 33, "dur": 5, "pid": 1, "tid": 1},
    ]  # fmt: skip
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = analyze(path)
    assert not result.has_gpu and CPU_ONLY in result.notes
    assert result.kernels.empty and list(result.kernels.columns) == list(KERNEL_COLUMNS)
    assert result.operators.set_index("operator").loc["aten::mm", "calls"] == 2
    rows = dict(result.summary)
    assert rows["CPU µs / forward"].startswith("40.0") and "GPU busy" not in rows


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"hello", "not valid JSON"),
        (b'{"schemaVersion": 1}', "no `traceEvents` list"),
        (b"[1, 2, 3]", "no complete"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon"}]}', "no complete event has"),
        (b"", "the file is empty"),
        (gzip.compress(b"not json at all", mtime=0), "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
    ],
)
def test_broken_uploads_say_what_is_wrong(data, message):
    with pytest.raises(TraceError, match=message):
        analyze(data)


def test_gzip_bomb_is_refused_quickly():
    bomb = gzip.compress(b"\0" * (200 * MiB), compresslevel=9)  # ~200 KB on the wire
    assert len(bomb) < MiB
    began = time.perf_counter()
    with pytest.raises(TraceError, match="expands to more than 64 MiB"):
        analyze(bomb, max_expanded_bytes=64 * MiB)
    assert time.perf_counter() - began < 5


def test_truncated_gzip(tmp_path):
    path = tmp_path / "cut.json.gz"
    path.write_bytes(NAIVE.read_bytes()[:2000])
    with pytest.raises(TraceError, match="gzip stream is corrupt"):
        analyze(path)


def test_upload_size_is_checked_before_reading(tmp_path, monkeypatch):
    import profiling.analysis.analyze as analyze_module

    def never(*args, **kwargs):
        raise AssertionError("read the file although it is over the limit")

    monkeypatch.setattr(analyze_module, "load", never)
    with pytest.raises(TraceError, match="the limit is 1 KiB"):
        analyze(NAIVE, max_upload_bytes=1024)  # the fixture is a few KB: over 1 KiB
    with pytest.raises(TraceError, match="cannot open trace"):
        analyze(tmp_path / "missing.json")


@pytest.mark.parametrize("with_stack", [False, True])
def test_operator_table_counts_calls_as_key_averages_does(tmp_path, with_stack):
    """An op that redispatches to itself (aten::mean inside aten::mean) is one call with one
    total, as in key_averages; record_function spans are rows too; every row's calls, total
    and self time agree with key_averages, also when Python frames interleave (with_stack)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    lin = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    x = torch.randn(4, 16)
    with profile(activities=[ProfilerActivity.CPU], with_stack=with_stack) as prof:
        for _ in range(3):
            with record_function("my_block"):
                lin(x).pow(2).mean().backward()
            opt.step()  # records Optimizer.step#SGD.step
            x.div_(1.0001)
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    reference = {e.key: e for e in prof.key_averages()}
    table = analyze(path).operators.set_index("operator")
    assert reference["aten::mean"].count == 3 and table.loc["aten::mean", "calls"] == 3
    assert {"my_block", "Optimizer.step#SGD.step"} <= set(table.index)
    for name, row in table.iterrows():
        ref = reference[name]
        assert row["calls"] == ref.count, name
        assert row["total_us"] == pytest.approx(ref.cpu_time_total, rel=0.01, abs=1), name
        assert row["self_us"] == pytest.approx(ref.self_cpu_time_total, rel=0.01, abs=1), name


def test_training_steps_are_called_steps_and_cpu_only_is_said_once(tmp_path):
    """A trace without attn_fwd spans is counted per ProfilerStep: forward, backward and the
    optimiser together are a step, not a forward."""
    from profiling.gantt.spec import X_TITLE
    from profiling.views import analyze as views_analyze

    def X(name, ts, dur, cat="cpu_op"):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": 1, "tid": 1}

    events = [X("ProfilerStep#1", 0, 100, "user_annotation"), X("aten::mm", 10, 20),
              X("ProfilerStep#2", 100, 100, "user_annotation"), X("aten::mm", 110, 20)]  # fmt: skip
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rows = dict(analyze(path).summary)
    assert rows["steps"] == "2 (ProfilerSteps)" and "CPU µs / step" in rows
    assert rows["events"] == "4 events → 4 spans in 1 lane (0 GPU), 0 skipped"
    assert not any("forward" in label for label in rows)
    page = views_analyze.analyze_page(str(path))
    assert page.summary.count(CPU_ONLY) == 1
    assert page.figure.layout["xaxis"]["title"]["text"] == X_TITLE
    path.write_text(json.dumps({"traceEvents": [X("aten::mm", 10, 20)]}))
    title = views_analyze.analyze_page(str(path)).figure.layout["xaxis"]["title"]["text"]
    assert title == "µs from the trace's first span (no ProfilerStep)"


@pytest.mark.parametrize(
    ("types", "expected"),
    [(["float", "float"], "float32"), (["c10::Half"], "float16"), ([], "")],
)
def test_the_roofline_dtype_is_the_one_the_recorded_shapes_use_most(types, expected):
    """Read from the CPU ops' recorded "Input type" (shared per shape by the reader), counted
    per op: 3 ops of `types` outvote 2 of bf16; a trace without shapes has none (issue 31: its
    roofline was titled "· bfloat16"), and its chart says so."""
    shaped = [("aten::mm", types)] * 3 + [("aten::bmm", ["c10::BFloat16"])] * 2 if types else []
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0,
         "args": {"Input Dims": [[4, 4]] * len(kinds), "Input type": kinds}}
        for i, (name, kinds) in enumerate(shaped)
    ] + [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 60.0, "dur": 1.0,
          "args": {"Input type": ["c10::BFloat16"] * 9}}]  # fmt: skip
    data = json.dumps({"record_shapes": "1", "traceEvents": events}).encode()
    result = analyze(data)
    assert result.dtype == expected
    title = roofline_spec(result.roofline, "", result.dtype).layout["title"]["text"]
    assert title.endswith(expected or "dtype not recorded")


def test_the_cyclic_collector_is_paused_while_the_analyses_run(monkeypatch):
    """Its full passes over 10⁶ kernels' tuples were ~3% of a 10⁷-event read (issue 42): off
    in the kernel views and in the views beside them, on again after."""
    import gc

    from profiling.analysis import analyze as analyze_module

    seen = {}
    for name in ("role_table", "launch_stats"):
        original = getattr(analyze_module, name)

        def recorded(*args, _name=name, _original=original, **kwargs):
            seen[_name] = gc.isenabled()
            return _original(*args, **kwargs)

        monkeypatch.setattr(analyze_module, name, recorded)
    assert gc.isenabled()
    analyze(NAIVE)
    assert seen == {"role_table": False, "launch_stats": False} and gc.isenabled()


def test_numpys_huge_pages_are_off_while_a_trace_is_read_and_analysed(monkeypatch):
    """Zeroing fresh 2 MB pages was ~17% of a 10⁷-event read's CPU (issue 42): off while the
    spans table is built and while the views run, restored after; numpy's switch is found."""
    from profiling.analysis import analyze as analyze_module
    from profiling.trace import memory as trace_memory
    from profiling.trace import model as trace_model

    assert trace_memory._hugepage_switch() is not None
    state = {"huge": True}

    def switch(on):
        was, state["huge"] = state["huge"], on
        return was

    monkeypatch.setattr(trace_memory, "_hugepage_switch", lambda: switch)
    seen = []
    build, roles = trace_model._build, analyze_module.role_table
    monkeypatch.setattr(trace_model, "_build", lambda r: seen.append(state["huge"]) or build(r))
    monkeypatch.setattr(analyze_module, "role_table",
                        lambda *a: seen.append(state["huge"]) or roles(*a))  # fmt: skip
    analyze(NAIVE)
    assert seen == [False, False] and state["huge"] is True


def test_operator_rows_come_in_order_of_first_appearance_with_groupbys_sums():
    """operator_sums finds each name's first row by a scatter (np.unique's sort of 10⁷ codes
    took 0.3 s): the names in order of first appearance and self time summed per name, as
    pandas' groupby(sort=False) gives them; a missing name is "", every step one row."""
    import numpy as np
    import pandas as pd

    from profiling.analysis.analyze import operator_sums

    rng = np.random.default_rng(4)
    pool = ["aten::mm", "aten::add", "ProfilerStep#1", "ProfilerStep#2", None, "z", "a"]
    names = [pool[i] for i in rng.integers(0, len(pool), 400)]
    spans = pd.DataFrame({
        "name": pd.Categorical(names),
        "parent": np.full(400, -1),
        "dur_us": rng.random(400),
        "self_us": rng.random(400),
    })  # fmt: skip
    rows = rng.permutation(400)[:300]
    table = operator_sums(spans, rows)
    merged = pd.Series(["" if n is None else "ProfilerStep*" if n.startswith("Prof") else n
                        for n in np.array(names, dtype=object)[rows]], dtype=object)  # fmt: skip
    want = spans["self_us"].to_numpy()[rows]
    want = pd.Series(want).groupby(merged, sort=False).sum()
    assert list(table.index) == list(want.index)
    assert np.allclose(table["self_us"].to_numpy(), want.to_numpy())


def test_kernels_that_share_a_key_share_the_work_computed_for_it(tmp_path, monkeypatch):
    """phases_roofline computes one Work per distinct key (KernelSpans.keys, hashed in order of
    first appearance, not sorted) and hands it to every kernel with that key: the same table
    as one Work per kernel, on a generated trace whose keys repeat."""
    import dataclasses

    import numpy as np
    import pandas as pd

    from benchmarks.gen_trace_independent import SHAPES, write
    from profiling.analysis import roofline_runs
    from profiling.analysis.analyze import _kernel_views
    from profiling.analysis.roofline_runs import phases_roofline, table_op_args
    from profiling.trace.model import load

    path = tmp_path / "t.json.gz"
    write(20_000, path, shape=SHAPES["six-streams"])
    trace = load(path)
    _, _, spans, _ = _kernel_views(trace)
    keys = np.asarray(spans.keys)
    assert len(np.unique(keys)) < len(keys) / 2  # keys repeat
    args = table_op_args(trace.spans)
    calls = []
    work = roofline_runs.kernel_work
    monkeypatch.setattr(roofline_runs, "kernel_work", lambda *a: calls.append(a) or work(*a))
    shared = phases_roofline({"trace": spans}, None, "NVIDIA H100", "bfloat16", args)
    assert len(calls) == len(np.unique(keys))
    alone = phases_roofline({"trace": dataclasses.replace(spans, keys=())}, None,
                            "NVIDIA H100", "bfloat16", args)  # fmt: skip
    pd.testing.assert_frame_equal(shared, alone)
