"""Issue 36: Nsight Compute's counters read from a report captured on the H200, joined to the
profiled kernels and the modelled roofline, and the refusals' words where they cannot run."""

from __future__ import annotations

import math
import os
import stat

import pandas as pd
import pytest

from profiling.analysis import counters_join as join
from profiling.analysis.counters import METRICS, Counters, read_report
from profiling.analysis.roofline_runs import phases_roofline
from profiling.run import counters as collect
from profiling.run import trace as run_trace
from tests.conftest import CUDNN, FIXTURES, NAIVE

# cuDNN's fused forward at B8 H16 S1024 D64 bf16 causal, under ncu 2025.3.1 on the H200
# (ncu --clock-control none --nvtx --nvtx-include attn_counters/ --launch-count 64)
CUDNN_REPORT = FIXTURES / "sdpa_cudnn_8_16_1024_64_bf16.ncu-rep"
QKV_BYTES = 3 * 8 * 16 * 1024 * 64 * 2  # Q, K and V in bf16: 50.3 MB


def test_the_report_reads_one_row_per_kernel_with_every_metric():
    counters = read_report(CUDNN_REPORT)
    kernels = counters.kernels
    assert len(kernels) == 1 and counters.missing == []
    row = kernels.iloc[0]
    assert row["kernel"].startswith("cudnn_generated_fort_native_sdpa_sm90_flash_fprop")
    assert row["dram_read_bytes"] == 50_355_712  # Q+K+V read once: within 5% of 50.3 MB
    assert abs(row["dram_read_bytes"] / QKV_BYTES - 1) < 0.05
    assert row["ncu_us"] == pytest.approx(57.792)  # ns in the report, µs in the column
    assert row["grid"] == 132 and row["block"] == 384
    for column in ("achieved_occupancy_pct", "tensor_pipe_pct", "sm_throughput_pct",
                   "dram_throughput_pct", "l2_hit_pct"):  # fmt: skip
        assert 0 < row[column] < 100, column


def test_a_metric_the_report_lacks_is_named_missing():
    import ncu_report

    class Renamed:  # the same module, asked for one metric under a name gh100 lacks
        IAction = ncu_report.IAction

        @staticmethod
        def load_report(path):
            return ncu_report.load_report(path)

    original = METRICS["l2_hit_pct"]
    METRICS["l2_hit_pct"] = "lts__no_such_metric.pct"
    try:
        counters = read_report(CUDNN_REPORT, Renamed)
    finally:
        METRICS["l2_hit_pct"] = original
    assert counters.missing == ["lts__no_such_metric.pct"]
    assert counters.kernels["l2_hit_pct"].isna().all()


def test_the_join_matches_by_name_in_launch_order_and_says_so():
    trace = run_trace.read(CUDNN)
    counters = read_report(CUDNN_REPORT)
    measured, words = join.per_kernel(counters, trace.phases)
    assert words == (
        "ncu measured 1 kernels of one step; 1 of the profiled step's 1 matched "
        "to them by function name in launch order; copies and memsets per step, not kernels (ncu "
        "measures none): 1"
    )  # the memset is no kernel
    kernels = join.with_kernels(trace.kernels, measured, "attn_fwd")
    fused = kernels[kernels["name"].str.startswith("cudnn_generated")].iloc[0]
    assert fused["dram_read_bytes"] == 50_355_712
    assert fused["occupancy_pct"] == pytest.approx(fused["achieved_occupancy_pct"])
    assert fused["occupancy_note"] == join.ACHIEVED_NOTE
    memset = kernels[kernels["name"].str.startswith("Memset")].iloc[0]
    assert pd.isna(memset["dram_read_bytes"])  # not measured: left empty, never estimated


def test_the_roofline_gets_the_measured_bytes_and_the_gap():
    trace = run_trace.read(CUDNN)
    from profiling.kernels.work import AttentionShape

    shape = AttentionShape.from_numbers(8, 16, 1024, 64, 2)
    rows = phases_roofline({n: p.spans for n, p in trace.phases.items()}, shape, "NVIDIA H200",
                           "bfloat16")  # fmt: skip
    measured, _ = join.per_kernel(read_report(CUDNN_REPORT), trace.phases)
    joined = join.with_roofline(rows, measured)
    fused = joined[joined["name"].str.startswith("cudnn_generated")].iloc[0]
    assert fused["measured_bytes_per_call"] == 50_355_712 + 8_831_744
    assert fused["measured_intensity"] == pytest.approx(
        fused["flop_per_call"] / fused["measured_bytes_per_call"]
    )
    modelled = fused["bytes_per_call"]
    change = 100 * ((50_355_712 + 8_831_744) / modelled - 1)  # measured against modelled
    assert fused["bytes_gap"] == (
        f"modelled {modelled / 1e6:,.1f} MB, measured 59.2 MB (read 50.4 MB, written 8.8 MB)"
        f" ({change:+.0f}%)"
    )
    assert f"({change:+.0f}%)" == "(-12%)"  # ncu moved less than the model: its sign


def test_ncu_kernels_beyond_the_profiled_step_are_counted_not_matched():
    trace = run_trace.read(NAIVE)
    names = [join.function_name(n) for _, n in join.step_kernels(trace.phases)]
    assert names == [
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
        "vectorized_elementwise_kernel",
        "elementwise_kernel",
        "softmax_warp_forward",
        "nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT",
    ]
    # ncu's demangled spelling ("(int)8", "<unnamed>") reads as the same function
    assert join.function_name("void <unnamed>::softmax_warp_forward<(int)10>(T2 *)") == (
        "softmax_warp_forward"
    )
    mem_efficient = (  # a kernel of no namespace returning void: the word is no part of it
        "void fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel"
        "<cutlass::half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)"
    )
    assert join.function_name(mem_efficient) == "fmha_cutlassF_f16_aligned_64x64_rf_sm80"
    assert join.function_name("void (anonymous namespace)::k<int>(int)") == "k"
    ncu = pd.DataFrame({"kernel": ["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
                                   "reduce_kernel", "elementwise_kernel"]})  # fmt: skip
    positions, words = join.match(join.step_kernels(trace.phases), ncu)
    assert positions == [0, -1, 2]
    assert "2 of the profiled step's 5 matched" in words
    assert "3 profiled not measured" in words and "1 measured outside" in words
    # order counts: a kernel ncu saw after the masked_fill cannot be the first GEMM
    late = pd.DataFrame({"kernel": ["elementwise_kernel",
                                    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"]})  # fmt: skip
    assert join.match(join.step_kernels(trace.phases), late)[0] == [2, -1]


def test_a_cpu_is_refused_with_its_reason():
    assert collect.unavailable_reason("cpu", env={}) == collect.ON_CPU
    counters = collect.measure({"variant": "naive"}, "cpu", FIXTURES)
    assert counters.reason == collect.ON_CPU and counters.kernels.empty


def test_a_zero_gpu_space_is_refused_with_its_reason():
    env = {"SPACE_ID": "someone/attention-profiler", "SPACES_ZERO_GPU": "true"}
    assert collect.unavailable_reason("cuda", env=env, ncu="/usr/bin/ncu") == collect.ON_ZERO_GPU


def test_no_ncu_on_path_is_refused_with_its_reason(monkeypatch, tmp_path):
    """ncu hidden wherever it is installed (a GPU machine has it): a PATH without it, and
    CUDA's usual folder read as holding none."""
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no ncu on it
    monkeypatch.delenv(collect.NCU_ENV, raising=False)
    access = os.access
    usual = "/usr/local/cuda/bin/ncu"
    monkeypatch.setattr(
        collect.os, "access", lambda path, mode: path != usual and access(path, mode)
    )
    env = {"PATH": str(tmp_path)}
    assert collect.find_ncu(env) == ""
    assert collect.unavailable_reason("cuda", env=env) == collect.NO_NCU
    counters = collect.measure({"variant": "naive"}, "cuda", tmp_path)
    assert counters.reason == collect.NO_NCU and counters.kernels.empty
    fake = tmp_path / "ncu"  # the same PATH with an ncu on it: found, so the refusal was its
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert collect.find_ncu(env) == str(fake)


def test_restricted_counters_say_how_to_allow_them(tmp_path, monkeypatch):
    # a real process that prints what ncu prints when counters are restricted, and fails
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have "
                    "permission to access NVIDIA GPU Performance Counters'\nexit 1\n")  # fmt: skip
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, collect.NCU_ENV: str(fake)}
    assert collect.unavailable_reason("cuda", env=env) == ""
    monkeypatch.setenv(collect.NCU_ENV, str(fake))
    counters = collect.measure({"variant": "naive"}, "cuda", tmp_path)
    assert counters.reason == collect.HOW_TO_ALLOW
    assert "NVreg_RestrictProfilingToAdminUsers=0" in counters.reason
    assert counters.kernels.empty and counters.seconds > 0


def test_no_kernels_in_the_range_is_said():
    said = collect.ncu_reason("==PROF== Disconnected\n==WARNING== No kernels were profiled.", 0)
    assert said == "ncu profiled no kernels inside the NVTX range 'attn_counters'"
    assert collect.ncu_reason("ok", 0) == ""
    assert collect.ncu_reason("boom\n", 3) == "ncu failed (exit 3): boom"


def test_the_ncu_line_profiles_the_range_only_and_caps_the_kernels(tmp_path):
    line = collect.ncu_command("ncu", tmp_path / "x.ncu-rep", {"variant": "naive"})
    assert line[line.index("--nvtx-include") + 1] == "attn_counters/"
    assert line[line.index("--launch-count") + 1] == "64"
    assert line[line.index("-o") + 1] == str(tmp_path / "x")
    assert line[-3:-1] == ["-m", "profiling.run.counters_step"]


def test_step_bytes_are_none_when_not_measured():
    assert join.step_bytes(Counters(reason="no")) == (None, None)
    assert join.step_bytes(read_report(CUDNN_REPORT)) == (50_355_712.0, 8_831_744.0)


def test_a_pass_reads_the_report_where_ncu_writes_it(tmp_path, monkeypatch):
    # a stand-in for ncu (no GPU here) that writes the H200's report where `-o NAME` puts it:
    # NAME.ncu-rep; the pass then reads it, times itself and says what ncu did
    fake = tmp_path / "ncu"
    fake.write_text(
        '#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\n'
        f'cp {CUDNN_REPORT} "$2.ncu-rep"\necho "==PROF== Report: $2.ncu-rep"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(collect.NCU_ENV, str(fake))
    counters = collect.measure({"variant": "sdpa-cudnn"}, "cuda", tmp_path)
    assert counters.measured and counters.reason == "" and counters.how == collect.HOW
    assert counters.report == tmp_path / "counters.ncu-rep"
    assert counters.kernels["dram_read_bytes"].tolist() == [50_355_712]
    assert (tmp_path / "counters.log").read_text().startswith(str(fake))


def test_the_measured_intensity_at_its_edges():
    """No bytes moved: no intensity (not infinity); one byte: the FLOPs themselves; FLOPs not
    a number (a roofline row without a model) or a kernel not measured: no intensity, as NaN."""
    rows = pd.DataFrame({"phase": ["fwd"] * 4, "name": ["none", "one", "text", "unmeasured"],
                         "flop_per_call": [100.0, 100.0, "n/a", 100.0],
                         "bytes_per_call": [8.0, 8.0, 8.0, 8.0]})  # fmt: skip
    measured = pd.DataFrame({"phase": ["fwd"] * 3, "name": ["none", "one", "text"],
                             "dram_read_bytes": [0.0, 1.0, 10.0],
                             "dram_write_bytes": [0.0, 0.0, 0.0]})  # fmt: skip
    joined = join.with_roofline(rows, measured).set_index("name")["measured_intensity"]
    assert joined["one"] == 100.0
    for name in ("none", "text", "unmeasured"):
        assert isinstance(joined[name], float) and math.isnan(joined[name]), name
