"""launch_stats' scope and edge cases: which windows and work count, what per forward divides
by, zero-length windows, ties, and the public helpers that expose each step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from profiling.analysis.launch import (
    GAP_COLUMNS,
    active_windows,
    busy_table,
    forward_count,
    launch_rows,
    launch_stats,
    scoped_work,
)
from profiling.trace import model as trace
from tests.conftest import H200, from_document


def _doc(events):
    return {"traceEvents": events}


def _x(name, cat, ts, dur, pid=0, tid=7, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


def test_the_scope_helpers_agree_with_launch_stats():
    tr = trace.load(H200["naive"])
    stats = launch_stats(tr)
    windows, scope = active_windows(tr)
    assert len(windows) == 3 and scope == "GPU work launched in the 3 active ProfilerSteps"
    assert stats.scope == scope and forward_count(tr) == stats.forwards == 3
    work, scope = scoped_work(tr)
    assert len(work) == stats.launches == 21 and scope == stats.scope
    devices, gaps = busy_table(work)
    pd.testing.assert_frame_equal(devices, stats.devices)
    pd.testing.assert_frame_equal(gaps, stats.gap_table)


def test_given_windows_select_the_work_launched_inside_them():
    tr = trace.load(H200["naive"])
    first_step = tr.steps().iloc[:1]
    stats = launch_stats(tr, first_step)
    assert stats.scope == "GPU work launched in the given windows"
    assert stats.launches == 7 and (stats.per_kernel["count"] == 1).all()  # one forward's work
    work, _ = scoped_work(tr, first_step)
    assert len(work) == 7


def test_busy_table_on_a_plain_frame_lists_devices_in_pid_order():
    """A work table without categoricals (read back from a CSV, say) groups as groupby does:
    devices sorted, whichever came first."""
    events = [_x("k", "kernel", 10 * i, 5, pid=pid) for i, pid in enumerate([3, 1, 3, 2])]
    work, _ = scoped_work(from_document(_doc(events)))
    plain = work.astype({c: str for c in ("pid", "tid", "name", "category")})
    devices, _ = busy_table(plain.iloc[::-1])  # device 2 first, then 3, then 1
    assert devices["device"].tolist() == ["1", "2", "3"]
    assert devices.set_index("device").loc["3", "window_us"] == 25


def _window_case(kind: str) -> list[dict]:
    """Two kernels, each launched at 1 and 21 µs; the CPU windows the launches fall in."""
    launches = [
        _x("cudaLaunchKernel", "cuda_runtime", 1 + 20 * i, 2, pid=1, tid=1, correlation=i)
        for i in range(2)
    ]
    kernels = [_x("k", "kernel", 50 + 10 * i, 5, correlation=i) for i in range(2)]
    step = lambda i, ts, dur: _x(f"ProfilerStep#{i}", "user_annotation", ts, dur, pid=1, tid=1)  # noqa: E731
    fwd = lambda ts: _x("attn_fwd", "user_annotation", ts, 10, pid=1, tid=1)  # noqa: E731
    windows = {
        "forwards in a step": [step(1, 0, 40), fwd(0), fwd(20)],
        "forwards": [fwd(0), fwd(20)],
        "steps": [step(1, 0, 20), step(2, 20, 20)],
        "none": [],
    }[kind]
    return windows + launches + kernels


@pytest.mark.parametrize(
    ("kind", "forwards", "scope"),
    [
        ("forwards in a step", 2, "GPU work launched in the 1 active ProfilerStep"),
        ("forwards", 2, "GPU work launched in the 2 attn_fwd spans"),
        ("steps", 2, "GPU work launched in the 2 active ProfilerSteps"),
        ("none", 1, "all GPU work (no ProfilerStep or attn_fwd spans in the trace)"),
    ],
)
def test_per_forward_divides_by_forwards_else_steps_else_one(kind, forwards, scope):
    stats = launch_stats(from_document(_doc(_window_case(kind))))
    assert stats.forwards == forwards and stats.scope == scope
    assert stats.launches == 2  # every launch counts, whatever the windows
    assert stats.cpu_launch_us_per_forward == 2 * 2 / forwards  # two 2 µs launches


def test_work_not_linked_to_a_step_is_all_counted_and_said():
    events = [
        _x("ProfilerStep#1", "user_annotation", 0, 20, pid=1, tid=1),
        _x("k", "kernel", 50, 5),  # no launch recorded (a warm-up leftover, say)
    ]
    stats = launch_stats(from_document(_doc(events)))
    assert stats.scope == "all GPU work (no GPU work is linked to a launch in the active steps)"
    assert stats.busy_us == 5 and stats.launches == 0


def test_gpu_events_without_gpu_work_are_not_a_cpu_only_trace():
    events = [_x("aten::mm", "cpu_op", 0, 5, pid=1, tid=1), _x("mark", "gpu_user_annotation", 1, 3)]
    stats = launch_stats(from_document(_doc(events)))
    assert stats.has_gpu and stats.busy_pct is None
    [(label, text)] = launch_rows(stats)
    assert label == "GPU busy" and text.startswith("n/a: no GPU work in scope (all GPU work")


def test_a_zero_length_window_has_no_busy_percentage():
    """A device whose only work lasts 0 µs has no busy share (not a division by zero); one of
    0.5 µs is 100% busy; the devices table keeps the percentage a float column (NaN)."""
    events = [_x("k", "kernel", 10, 0.5, pid=0), _x("k", "kernel", 10, 0, pid=1)]
    stats = launch_stats(from_document(_doc(events)))
    pct = stats.devices.set_index("device")["busy_pct"]
    assert pct["0"] == 100 and np.isnan(pct["1"]) and pct.dtype == float
    assert stats.devices.set_index("device").loc["0", "idle_pct"] == 0
    assert stats.device == "0" and stats.busy_pct == 100
    alone = launch_stats(from_document(_doc(events[1:])))
    assert alone.busy_pct is None and alone.idle_pct is None and alone.window_us == 0
    assert list(alone.gap_table.columns) == GAP_COLUMNS and alone.gap_table.empty


def test_equal_gaps_are_listed_in_time_order():
    """Gaps longest first; equal ones in the order they happened (a stable sort: 30 gaps of
    two lengths, enough for an unstable sort to reorder them)."""
    starts = np.cumsum([0.0] + [5 + 1 + i % 2 for i in range(30)])  # gaps of 1 and 2 µs
    events = [_x("k", "kernel", float(ts), 5) for ts in starts]
    gaps = launch_stats(from_document(_doc(events))).gap_table
    assert gaps["dur_us"].tolist() == [2.0] * 15 + [1.0] * 15
    long, short = gaps["start_us"][:15].tolist(), gaps["start_us"][15:].tolist()
    assert long == sorted(long) and short == sorted(short)


def test_launch_rows_labels():
    """The labels the page and the CLI show, in order."""
    rows = launch_rows(launch_stats(trace.load(H200["naive"])))
    assert [label for label, _ in rows] == [
        "scope", "GPU busy", "GPU idle", "CPU launch", "launch delay", "launch → start",
        "not counted",  # the warm-up's two kernels, launched before recording began
    ]  # fmt: skip
    assert rows[-1][1].startswith("2 GPU work items, 367.5 µs (10.3% of all GPU work)")
    assert rows[-2][1].endswith(" µs (GPU start − launch start)")
    assert rows[-3][1].endswith(" µs (GPU start − launch end)")


def test_launch_texts_are_read_once_per_value_the_launches_hold():
    """launch_tables._text: each row's text as `fn` of its value (a categorical's values the
    same as an object column's), `fn` called only for the values at the rows asked for (a
    10⁷-event trace's 4·10⁴ ProfilerStep names are no launch's), values several names share
    one category, and a missing value stays missing."""
    from profiling.analysis.launch_tables import _text

    names = ["k1", "ProfilerStep#1", "k2", "k1 (dup)", None, "k3"]
    column = pd.Series(pd.Categorical(names * 3))
    rows = np.array([0, 2, 3, 4, 6, 9, 14, 16])  # k1, k2, k1 (dup), None, k1, k1 (dup), ...
    called = []

    def short(name):
        called.append(name)
        return name.split(" ")[0]

    got = _text(column, rows, short)
    assert called == ["k1", "k1 (dup)", "k2"]  # once each, never ProfilerStep#1 nor k3
    assert list(got.categories) == ["k1", "k2"]
    assert [None if pd.isna(v) else v for v in got] == ["k1", "k2", "k1", None, "k1", "k1",
                                                        "k2", None]  # fmt: skip


def test_which_windows_hold_every_thread_is_read_once_per_name():
    """summary._all_threads: a ProfilerStep#N or an ALL_THREADS name holds every thread's
    work, any other name (and a missing one) its own thread's; decided per distinct name at
    the rows, the answer per row as a name-by-name test gives it."""
    from profiling.analysis.summary import _all_threads, _holds_all
    from profiling.vocabulary import ALL_THREADS, FORWARD

    pool = ["ProfilerStep#3", "ProfilerStep#12", *ALL_THREADS, FORWARD, "aten::mm", None, ""]
    rng = np.random.default_rng(0)
    names = [pool[i] for i in rng.integers(0, len(pool), 300)]
    spans = pd.DataFrame({"name": pd.Categorical([*names, "never asked"])})
    rows = rng.integers(0, 300, 120)
    want = [n is not None and _holds_all(n) for n in np.array(names, dtype=object)[rows]]
    assert _all_threads(spans, rows).tolist() == want
    assert _all_threads(spans, rows[:0]).tolist() == []
