"""GPU busy/idle and launch figures on the H200 fixtures and on hand-made traces."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pandas as pd
import pytest

from profiling.analysis.launch import (
    DEVICE_COLUMNS,
    GAP_COLUMNS,
    launch_rows,
    launch_stats,
    merge_intervals,
    scoped_work,
)
from profiling.analysis.launch_tables import (
    LAUNCH_COLUMNS,
    PER_KERNEL_COLUMNS,
    launch_table,
    per_kernel_table,
)
from profiling.kernels.names import short_name
from profiling.trace import model as trace
from profiling.trace.events import EPS_US
from tests.conftest import FIXTURES, H200, from_document


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
    assert stats.devices["memory_us"].iloc[0] == pytest.approx(memory, abs=1e-6)
    # CPU launch time per forward: all launch spans' time over the 3 forwards
    per_forward = stats.per_launch["cpu_launch_us"].sum() / 3
    assert stats.cpu_launch_us_per_forward == pytest.approx(per_forward)


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
    one = launch_stats(trace.load(H200["flash"]))
    one.gaps = 1  # now common: the rounding 'gaps' between back-to-back work are merged
    assert " in 1 gap, " in dict(launch_rows(one))["GPU idle"]


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
    stats = launch_stats(from_document(_doc(events)))
    dev = stats.devices.set_index("device")
    assert dev.loc["0", "window_us"] == 40 and dev.loc["0", "busy_us"] == 30
    assert dev.loc["0", "gaps"] == 1 and dev.loc["0", "largest_gap_us"] == 10
    assert dev.loc["1", "busy_us"] == 2 and dev.loc["1", "gaps"] == 0
    assert dev.loc["1", "largest_gap_us"] == 0  # no gap: zero, not a made-up one
    assert list(stats.gap_table.columns) == GAP_COLUMNS
    assert stats.gap_table.iloc[0][["start_us", "end_us", "dur_us"]].tolist() == [30, 40, 10]
    assert stats.device == "0" and stats.busy_pct == pytest.approx(75)
    assert stats.gap_table.iloc[0]["next"] == "k4"
    k4 = stats.per_launch.set_index("kernel").loc["k4"]
    assert k4["launch_delay_us"] == 40 - 8 and k4["launch_to_start_us"] == 40 - 7


def test_cpu_only_trace_has_no_gpu_figures():
    events = [_x("ProfilerStep#1", "user_annotation", 0, 10, tid=1), _x("aten::mm", "cpu_op", 1, 5)]
    stats = launch_stats(from_document(_doc(events)))
    assert not stats.has_gpu and stats.busy_pct is None and stats.launches == 0
    assert stats.per_kernel.empty and stats.devices.empty and stats.gaps == 0
    assert list(stats.devices.columns) == DEVICE_COLUMNS
    assert list(stats.per_launch.columns) == LAUNCH_COLUMNS
    assert list(stats.per_kernel.columns) == PER_KERNEL_COLUMNS
    assert list(per_kernel_table(stats.per_launch).columns) == PER_KERNEL_COLUMNS
    assert launch_rows(stats) == [("GPU busy", "n/a: no GPU events (a CPU-only trace)")]


def test_launch_table_is_launch_stats_per_launch():
    tr = trace.load(H200["naive"])
    work, _ = scoped_work(tr)
    pd.testing.assert_frame_equal(launch_table(tr, work), launch_stats(tr).per_launch)
    assert len(launch_table(tr, work.iloc[:5])) == 5  # the rows it is given, each linked


def test_a_launch_in_the_first_row_is_linked():
    """Row 0 of the spans table is a valid link (the earliest span is often the launch)."""
    events = [
        _x("cudaLaunchKernel", "cuda_runtime", 0, 1, pid=1, tid=1, correlation=1),
        _x("k", "kernel", 5, 2, correlation=1),
    ]
    stats = launch_stats(from_document(_doc(events)))
    assert stats.launches == 1 and stats.per_launch["cpu_launch_us"].tolist() == [1]


def test_launches_that_start_together_keep_their_work_order():
    """30 threads launch at two instants: each instant's launches keep their kernels' order (a
    stable sort; enough ties for an unstable one to reorder them)."""
    events = []
    for i in range(30):
        events.append(_x("cudaLaunchKernel", "cuda_runtime", 1 + i % 2, 1, pid=1, tid=100 + i,
                         correlation=i))  # fmt: skip
        events.append(_x(f"k{i:02}", "kernel", 10 + 3 * i, 2, correlation=i))
    stats = launch_stats(from_document(_doc(events)))
    first, then = [f"k{i:02}" for i in range(0, 30, 2)], [f"k{i:02}" for i in range(1, 30, 2)]
    assert stats.per_launch["kernel"].tolist() == first + then


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


def test_merge_intervals_merges_gaps_that_are_float_rounding():
    """Timestamps in µs with ns resolution: a 1e-10 µs 'gap' is rounding, not an idle gap
    (gen_trace's 300k-event trace read 7,846 gaps, 7,845 of them under 5e-10 µs)."""
    starts = np.array([0.0, 1.1 + 3e-10, 2.2 + 1e-12, 5.0])
    ends = np.array([1.1, 2.2, 3.0, 6.0])
    ms, me, opener = merge_intervals(starts, ends)
    assert ms.tolist() == [0.0, 5.0] and me.tolist() == [3.0, 6.0] and opener.tolist() == [0, 3]
    ms, _, _ = merge_intervals(np.array([0.0, 1.0 + 0.01]), np.array([1.0, 2.0]))
    assert len(ms) == 2  # 10 ns is a real gap
    ms, _, _ = merge_intervals(np.array([0.0, 1.0 + EPS_US]), np.array([1.0, 2.0]))
    assert len(ms) == 1  # a new group needs *more* than EPS_US after the last end


def test_merge_intervals_opener_is_the_first_input_among_equal_starts():
    """The gap table names the work that ends each gap: among items starting together, the
    first one given (a stable sort; 40 items, enough for an unstable sort to pick another)."""
    starts = np.repeat([10.0, 0.0], 20)
    _, _, opener = merge_intervals(starts, starts + 1)
    assert opener.tolist() == [20, 0]


def test_merge_intervals_is_vectorised_for_a_million_events():
    rng = np.random.default_rng(1)
    starts = np.sort(rng.random(1_000_000) * 1e7)
    began = time.perf_counter()
    merge_intervals(starts, starts + rng.random(1_000_000) * 20)
    assert time.perf_counter() - began < 2.0


# The fast version (numpy over row positions) against the obvious pandas one: masks, a join on
# the launch link, a groupby per name. Means may differ in the last bits (pandas sums a group
# its own way), so they are compared to 1e-12 relative.


def _reference_per_kernel(per_launch):
    g = per_launch.groupby("name", sort=False)
    table = pd.DataFrame(
        {
            "kernel": g["kernel"].first(),
            "category": g["category"].first(),
            "launch_api": g["launch_api"].agg(lambda s: ", ".join(dict.fromkeys(s))),
            "count": g.size(),
            **{f"{c}_mean_us": g[f"{c}_us"].mean() for c in ("cpu_launch", "launch_delay")},
            **{f"{c}_max_us": g[f"{c}_us"].max() for c in ("cpu_launch", "launch_delay")},
            "launch_to_start_mean_us": g["launch_to_start_us"].mean(),
            "launch_to_start_max_us": g["launch_to_start_us"].max(),
            "gpu_mean_us": g["gpu_us"].mean(),
        }
    )
    table["name"] = table.index.to_numpy()
    return table.reset_index(drop=True)[PER_KERNEL_COLUMNS]


def _reference_per_launch(tr):
    s = tr.spans
    work = s[(s["kind"] == "gpu") & s["category"].isin(["kernel", "memcpy", "memset"])]
    work = work[work["link"] >= 0]
    launch = s.iloc[work["link"].to_numpy()]
    steps = tr.steps()
    # a ProfilerStep holds every thread's launches (a train step's backward runs on autograd's
    # thread: the h200_train fixtures launch from two)
    inside = [
        bool(((steps["start_us"] <= t) & (steps["end_us"] >= t)).any()) or steps.empty
        for t in launch["start_us"]
    ]  # a trace with no ProfilerStep (a user's, profiled without a schedule): all its work
    # a cold-l2 run's flush is launched in its attn_l2_flush spans: no work of the run's
    flush = s[(s["kind"] == "cpu") & (s["name"] == "attn_l2_flush")]
    inside = [
        keep and not ((flush["start_us"] <= t) & (flush["end_us"] >= t)).any()
        for keep, t in zip(inside, launch["start_us"], strict=True)
    ]
    work, launch = work[inside], launch[inside]
    g_start, l_start = work["start_us"].to_numpy(), launch["start_us"].to_numpy()
    table = pd.DataFrame(
        {
            "kernel": [short_name(n) for n in work["name"]],
            "category": work["category"].to_numpy(),
            "launch_api": launch["name"].to_numpy(),
            "correlation": work["correlation"].to_numpy(),
            "step": work["step"].to_numpy(),
            "launch_start_us": l_start,
            "cpu_launch_us": launch["dur_us"].to_numpy(),
            "gpu_start_us": g_start,
            "gpu_us": work["dur_us"].to_numpy(),
            "launch_delay_us": np.clip(g_start - launch["end_us"].to_numpy(), 0.0, None),
            "launch_to_start_us": g_start - l_start,
            "name": work["name"].astype(str).to_numpy(),
        }
    )
    return work, table.sort_values("launch_start_us", kind="stable").reset_index(drop=True)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json.gz")), ids=lambda p: p.name)
def test_launch_stats_equals_the_plain_pandas_computation(path):
    tr = trace.load(path)
    stats = launch_stats(tr)
    work, per_launch = _reference_per_launch(tr)
    got = stats.per_launch  # its text columns categorical (few names, 10⁵ launches)
    text = [c for c in got if isinstance(got[c].dtype, pd.CategoricalDtype)]
    assert text == (["kernel", "category", "launch_api", "name"] if len(got) else [])
    got = got.astype({c: per_launch[c].dtype for c in text})
    pd.testing.assert_frame_equal(got, per_launch, check_exact=True)
    pd.testing.assert_frame_equal(stats.per_kernel, _reference_per_kernel(per_launch),
                                  check_exact=False, rtol=1e-12)  # fmt: skip
    calls = per_launch.drop_duplicates("correlation")  # a graph's kernels share its launch
    assert stats.cpu_launch_mean_us == calls["cpu_launch_us"].mean()
    assert stats.launch_calls == len(calls)
    assert stats.launch_to_start_max_us == per_launch["launch_to_start_us"].max()
    for row in stats.devices.itertuples():  # the union of intervals, one interval at a time
        mine = work[work["pid"] == row.device].sort_values("start_us")
        merged: list[list[float]] = []
        for a, b in zip(mine["start_us"], mine["end_us"], strict=True):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(merged)]
        assert row.busy_us == pytest.approx(sum(b - a for a, b in merged), abs=1e-6)
        assert row.window_us == merged[-1][1] - merged[0][0] and row.gaps == len(gaps)
        assert row.largest_gap_us == pytest.approx(max(gaps, default=0.0))
        table = stats.gap_table[stats.gap_table["device"] == row.device]
        assert sorted(table["dur_us"], reverse=True) == pytest.approx(sorted(gaps, reverse=True))


@pytest.mark.parametrize("contiguous, per_name", [(True, 5), (False, 5), (False, 200)])
def test_per_kernel_table_matches_a_pandas_groupby(contiguous, per_name):
    """Names launched in runs, interleaved, interleaved and long."""
    rng = np.random.default_rng(per_name)
    names = np.repeat([f"k{i}" for i in range(4)], per_name)
    if not contiguous:
        names = rng.permutation(names)
    n = len(names)
    values = {c: rng.random(n) * 10.0 ** rng.integers(-3, 6, n) for c in LAUNCH_COLUMNS[5:11]}
    per_launch = pd.DataFrame(
        {
            "kernel": names,
            "category": "kernel",
            "launch_api": rng.choice(["cudaLaunchKernel", "cuLaunchKernel"], n),
            "correlation": np.arange(n),
            "step": np.zeros(n, dtype=np.int64),
            **values,
            "name": names,
        }
    )
    pd.testing.assert_frame_equal(per_kernel_table(per_launch),
                                  _reference_per_kernel(per_launch), check_exact=False,
                                  rtol=1e-12)  # fmt: skip
