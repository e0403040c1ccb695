"""GPU busy/idle and launch figures on the H200 fixtures and on hand-made traces."""

from __future__ import annotations

import time

import numpy as np
import pytest

from profiling import trace
from profiling.launch import launch_rows, launch_stats, merge_intervals
from tests.conftest import FIXTURES

H200 = {
    "naive": FIXTURES / "naive_8_16_1024_64_bf16.json.gz",
    "flash": FIXTURES / "sdpa_flash_8_16_1024_64_bf16.json.gz",
    "cudnn": FIXTURES / "sdpa_cudnn_8_16_1024_64_bf16.json.gz",
}


def test_naive_launch_figures_for_every_kernel_memcpy_and_memset():
    stats = launch_stats(trace.load(H200["naive"]))
    # h200-baseline.md: 5 kernels + 1 Memcpy + 1 Memset per forward, 3 forwards
    assert stats.launches == 21 and stats.forwards == 3
    per = stats.per_kernel.set_index("kernel")
    assert len(per) == 7 and (per["count"] == 3).all()
    assert per.loc["Memcpy DtoD", "launch_api"] == "cudaMemcpyAsync"
    assert per.loc["Memset", "launch_api"] == "cudaMemsetAsync"
    gemms = per[per.index.str.startswith("nvjet")]
    assert len(gemms) == 2 and (gemms["launch_api"] == "cuLaunchKernelEx").all()
    # the warm-up's two leftover kernels (no launch recorded) are not in scope
    assert "active ProfilerSteps" in stats.scope


def test_busy_is_the_union_of_work_over_the_first_to_last_window():
    tr = trace.load(H200["naive"])
    stats = launch_stats(tr)
    s = tr.spans
    work = s[(s["kind"] == "gpu") & s["category"].isin(["kernel", "memcpy", "memset"])]
    work = work[work["link"] >= 0]
    # one stream, nothing overlaps: busy = sum of durations; window = first start → last end
    assert stats.busy_us == pytest.approx(work["dur_us"].sum(), abs=1e-6)
    assert stats.window_us == pytest.approx(work["end_us"].max() - work["start_us"].min())
    assert stats.busy_us + stats.idle_us == pytest.approx(stats.window_us)
    assert 0 < stats.busy_pct < 100 and stats.busy_pct + stats.idle_pct == pytest.approx(100)
    assert stats.gaps == 20 and len(stats.gap_table) == 20  # 21 back-to-back items
    assert stats.gap_table["dur_us"].sum() == pytest.approx(stats.idle_us)
    memory = work[work["category"] != "kernel"]["dur_us"].sum()
    assert stats.busy_us - stats.compute_us == pytest.approx(memory, abs=1e-6)


def test_launch_delay_matches_the_spans_it_comes_from():
    tr = trace.load(H200["naive"])
    stats = launch_stats(tr)
    row = stats.per_launch.iloc[5]
    kernel = tr.spans[(tr.spans["correlation"] == row["correlation"]) & (tr.spans["kind"] == "gpu")]
    launch = tr.spans.iloc[int(kernel["link"].iloc[0])]
    k_start = float(kernel["start_us"].iloc[0])
    assert row["cpu_launch_us"] == pytest.approx(launch["dur_us"])
    assert row["launch_delay_us"] == pytest.approx(max(0.0, k_start - launch["end_us"]))
    assert row["launch_to_start_us"] == pytest.approx(k_start - launch["start_us"])
    assert (stats.per_launch["launch_delay_us"] >= 0).all()


def test_gpu_bound_naive_vs_cpu_bound_fused_kernels():
    """The post's point as numbers: naive keeps the GPU busy with a deep queue; flash and cuDNN
    leave it idle between forwards, their kernels starting as soon as they are launched."""
    naive, flash, cudnn = (launch_stats(trace.load(H200[k])) for k in ("naive", "flash", "cudnn"))
    assert naive.busy_pct > 98 and naive.launch_delay_mean_us > 500
    for fused in (flash, cudnn):
        assert fused.busy_pct < 70 and fused.launch_delay_mean_us < 5
        assert fused.largest_gap_us > 10
    cudnn_kernel = cudnn.per_kernel[cudnn.per_kernel["category"] == "kernel"].iloc[0]
    assert cudnn_kernel["launch_api"] == "cuLaunchKernelEx"
    assert "cudnn_generated" in cudnn_kernel["name"]


def test_launch_rows_read_as_sentences():
    rows = dict(launch_rows(launch_stats(trace.load(H200["flash"]))))
    assert rows["GPU busy"].startswith("54.4%")
    assert "2 gaps" in rows["GPU idle"]


def _doc(events):
    return {"traceEvents": events}


def _x(name, cat, ts, dur, pid=0, tid=7, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


def test_streams_merge_touching_intervals_join_and_devices_stay_apart():
    events = [
        _x("ProfilerStep#1", "user_annotation", 0, 100, pid=1, tid=1),
        _x("cudaLaunchKernel", "cuda_runtime", 1, 1, pid=1, tid=1, correlation=1),
        _x("cudaLaunchKernel", "cuda_runtime", 3, 1, pid=1, tid=1, correlation=2),
        _x("cudaLaunchKernel", "cuda_runtime", 5, 1, pid=1, tid=1, correlation=3),
        _x("cudaLaunchKernel", "cuda_runtime", 7, 1, pid=1, tid=1, correlation=4),
        _x("cudaLaunchKernel", "cuda_runtime", 9, 1, pid=1, tid=1, correlation=5),
        _x("k1", "kernel", 10, 10, tid=7, correlation=1),  # 10–20 on stream 7
        _x("k2", "kernel", 15, 10, tid=8, correlation=2),  # 15–25 on stream 8: overlaps k1
        _x("k3", "kernel", 25, 5, tid=7, correlation=3),  # 25–30 touches k2: no gap
        _x("k4", "kernel", 40, 10, tid=7, correlation=4),  # gap 30–40
        _x("k5", "kernel", 12, 2, pid=1, tid=7, correlation=5),  # another device
    ]
    stats = launch_stats(trace.from_document(_doc(events)))
    dev = stats.devices.set_index("device")
    assert dev.loc["0", "window_us"] == 40 and dev.loc["0", "busy_us"] == 30
    assert dev.loc["0", "gaps"] == 1 and dev.loc["0", "largest_gap_us"] == 10
    assert dev.loc["1", "busy_us"] == 2 and dev.loc["1", "gaps"] == 0
    assert stats.device == "0" and stats.busy_pct == pytest.approx(75)
    assert stats.gap_table.iloc[0]["next"] == "k4"
    k4 = stats.per_launch.set_index("kernel").loc["k4"]
    assert k4["launch_delay_us"] == 40 - 8 and k4["launch_to_start_us"] == 40 - 7


def test_cpu_only_trace_has_no_gpu_figures():
    events = [_x("ProfilerStep#1", "user_annotation", 0, 10, tid=1), _x("aten::mm", "cpu_op", 1, 5)]
    stats = launch_stats(trace.from_document(_doc(events)))
    assert not stats.has_gpu and stats.busy_pct is None and stats.launches == 0
    assert stats.per_kernel.empty and stats.devices.empty
    assert "CPU-only" in launch_rows(stats)[0][1]


def test_merge_intervals_against_brute_force():
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 1000, 300).astype(float)
    ends = starts + rng.integers(0, 30, 300)
    ms, me, opener = merge_intervals(starts, ends)
    covered = np.zeros(1100, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        covered[int(s) : int(e)] = True
    assert (me - ms).sum() == covered.sum()
    assert (ms[1:] > me[:-1]).all()  # disjoint, ordered, touching ones merged
    assert np.array_equal(starts[opener], ms)


def test_merge_intervals_is_vectorised_for_a_million_events():
    rng = np.random.default_rng(1)
    starts = np.sort(rng.random(1_000_000) * 1e7)
    began = time.perf_counter()
    merge_intervals(starts, starts + rng.random(1_000_000) * 20)
    assert time.perf_counter() - began < 2.0
