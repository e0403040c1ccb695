"""GPU idle time and launch overhead, read off the spans table (HTA's definitions).

Two questions the post answers by eye, as numbers: was the GPU busy, or waiting for the CPU?
And what did each kernel cost on the CPU to launch, and how long did it wait to start?

Definitions, matching HolisticTraceAnalysis 0.5.0 (`get_temporal_breakdown`,
`get_cuda_kernel_launch_stats`) so the figures can be checked against it
(benchmarks/hta_crosscheck.py, docs/hta-crosscheck.md):

- Scope: GPU work (kernels, memcpy, memset; GPU annotations excluded) whose launch started
  inside the active ProfilerSteps (else the attn_fwd spans, else the whole trace). This is
  HTA's `TraceAnalysis(include_last_profiler_step=True)` filter: GPU work is kept when its
  correlation id matches a CPU event of a recorded step, so kernels left over from the
  unrecorded warm-up drop out.
- Window (per device): from the start of the first GPU work in scope to the end of the last
  (HTA's `kernel_time`). It does not start at the first ProfilerStep: the profiler's own start-up
  in the first step would read as GPU idle time.
- Busy: the union of the work intervals on that device, all streams merged (intervals that touch
  merge, as in HTA's `merge_kernel_intervals`; so do those apart by less than 2 ns, the nesting
  tolerance `EPS_US`: µs floats with ns resolution leave 1e-10 µs 'gaps' between back-to-back
  work, which are rounding, not idle time). Idle = window − busy = the sum of the gaps.
  Compute = the union of kernels only; memory = busy − compute (HTA's `non_compute_time`).
- CPU launch duration: the duration of the runtime/driver span linked to the GPU work by its
  correlation id (`cudaLaunchKernel`, `cuLaunchKernelEx`, `cudaMemcpyAsync`, ...). The
  headline's mean, max and sum count each launch call once: a CUDA graph's replay is one
  `cudaGraphLaunch` linked from each of its kernels (HTA's table leaves those out).
- GPU work no launch in the trace points to (launched before recording began, or by a call
  not recorded) is in no window's figures; how much of it there is, is said ("not counted").
- Launch delay: GPU start − end of that launch span, clipped at 0 (HTA's `launch_delay`).
  Launch→start: GPU start − start of the launch span (not clipped): the whole trip from the
  moment the CPU began launching to the moment the GPU began running.

One difference from HTA, deliberate: HTA's launch stats know only `cudaLaunchKernel`,
`cudaLaunchKernelExC`, `cudaMemcpyAsync` and `cudaMemsetAsync`; kernels launched through the
driver API are missing from its table: `cuLaunchKernel` (every Triton kernel: flex, compiled
naive) and `cuLaunchKernelEx` (cuBLAS's nvjet GEMMs, cuDNN's attention on Hopper). Here every
linked launch counts; `launch_api` says which one it was.

Computed on numpy arrays over row positions of the spans table, each output frame built once:
a run's trace has a few hundred spans, where every pandas filter, groupby or row take costs
more (0.1–0.3 ms) than the arithmetic (the pandas version was ~9 ms per run). This module
scopes the work and reads busy/idle per device; launch_tables builds the per-launch and
per-kernel rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profiling.analysis.launch_tables import (
    LAUNCH_COLUMNS,
    PER_KERNEL_COLUMNS,
    launch_calls,
    launch_columns,
    launch_frame,
    per_kernel_frame,
    unlinked_work,
)
from profiling.analysis.summary import forward_rows, launched_rows, work_rows
from profiling.kernels.names import short_name
from profiling.text_tables import counted
from profiling.trace.events import EPS_US
from profiling.trace.model import Trace
from profiling.trace.query import is_in, step_rows, values_at
from profiling.vocabulary import FORWARD, L2_FLUSH, STEP

DEVICE_COLUMNS = [
    "device", "window_start_us", "window_end_us", "window_us", "busy_us", "compute_us",
    "memory_us", "idle_us", "busy_pct", "idle_pct", "gaps", "largest_gap_us", "work_items",
]  # fmt: skip
GAP_COLUMNS = ["device", "start_us", "end_us", "dur_us", "next"]


@dataclass
class LaunchStats:
    """GPU busy/idle and launch figures of one trace; plain data, picklable."""

    scope: str  # which windows selected the GPU work, in words
    forwards: int  # divisor of the per-window figures: attn_step, else attn_fwd spans, else steps
    has_gpu: bool
    device: str | None  # the device the headline figures describe (the busiest one)
    window_us: float | None
    busy_us: float | None
    compute_us: float | None
    idle_us: float | None
    busy_pct: float | None
    idle_pct: float | None
    gaps: int
    largest_gap_us: float | None
    launches: int  # GPU work items with a linked launch span
    # the CPU launch figures count each launch call once: a cudaGraphLaunch starts every
    # kernel of its graph (they share its correlation id), its time is spent once
    cpu_launch_mean_us: float | None
    cpu_launch_max_us: float | None
    cpu_launch_us_per_forward: float | None  # per `unit`
    launch_delay_mean_us: float | None
    launch_delay_max_us: float | None
    launch_to_start_mean_us: float | None
    launch_to_start_max_us: float | None
    devices: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DEVICE_COLUMNS))
    gap_table: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=GAP_COLUMNS))
    per_launch: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LAUNCH_COLUMNS))
    per_kernel: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=PER_KERNEL_COLUMNS)
    )
    unit: str = "forward"  # what `forwards` counts: forward (attn_fwd), step, or trace
    launch_calls: int = 0  # distinct launch spans behind `launches`
    multi_launches: list[tuple[str, int, int]] = field(default_factory=list)  # launch_calls
    unlinked: int = 0  # GPU work no CPU launch in the trace points to: in no window's figures
    unlinked_us: float = 0.0
    gpu_work_us: float = 0.0  # all GPU work's µs, what `unlinked_us` is a share of


def active_windows(trace: Trace) -> tuple[pd.DataFrame, str]:
    """The CPU windows whose launches are in scope: active steps, else forwards, else none."""
    rows, scope = _active_rows(trace.spans)
    return trace.spans.iloc[rows], scope


def forward_count(trace: Trace) -> int:
    """attn_fwd spans, else ProfilerSteps, else 1: what 'per forward' divides by."""
    return _forward_count(trace.spans)


def scoped_work(trace: Trace, windows: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """GPU work in scope and the words for it (see the module docstring)."""
    rows, scope = _scoped_rows(trace.spans, windows)
    return trace.spans.iloc[rows], scope


def launch_stats(trace: Trace, windows: pd.DataFrame | None = None) -> LaunchStats:
    """Busy/idle per device and launch figures per GPU work item, kernel name and overall."""
    spans = trace.spans
    rows, scope = _scoped_rows(spans, windows)
    forwards, unit = _per_unit(spans)
    device_rows, gaps = _busy(spans, rows)
    launches = launch_columns(spans, spans, rows)
    head = None
    if device_rows:
        busiest = _descending(np.array([r["busy_us"] for r in device_rows]), "quicksort")[0]
        head = device_rows[busiest]
    n = 0 if launches is None else len(launches["name"])
    call_us, multi = launch_calls(spans, rows)
    unlinked, all_work = unlinked_work(spans, rows)
    dur = spans["dur_us"].to_numpy(float)

    def agg(column: str, how: str) -> float | None:
        return float(getattr(launches[column], how)()) if n else None

    return LaunchStats(
        scope=scope,
        forwards=forwards,
        has_gpu=bool(len(rows)) or trace.has_gpu,  # work in scope is GPU work
        device=None if head is None else str(head["device"]),
        window_us=None if head is None else float(head["window_us"]),
        busy_us=None if head is None else float(head["busy_us"]),
        compute_us=None if head is None else float(head["compute_us"]),
        idle_us=None if head is None else float(head["idle_us"]),
        busy_pct=None if head is None else _opt(head["busy_pct"]),
        idle_pct=None if head is None else _opt(head["idle_pct"]),
        gaps=0 if head is None else int(head["gaps"]),
        largest_gap_us=None if head is None else float(head["largest_gap_us"]),
        launches=n,
        cpu_launch_mean_us=float(call_us.mean()) if n else None,
        cpu_launch_max_us=float(call_us.max()) if n else None,
        cpu_launch_us_per_forward=float(call_us.sum()) / forwards if n else None,
        launch_delay_mean_us=agg("launch_delay_us", "mean"),
        launch_delay_max_us=agg("launch_delay_us", "max"),
        launch_to_start_mean_us=agg("launch_to_start_us", "mean"),
        launch_to_start_max_us=agg("launch_to_start_us", "max"),
        devices=_devices_frame(device_rows),
        gap_table=gaps,
        per_launch=launch_frame(launches),
        per_kernel=per_kernel_frame(launches),
        unit=unit,
        launch_calls=len(call_us),
        multi_launches=multi,
        unlinked=len(unlinked),
        unlinked_us=float(dur[unlinked].sum()),
        gpu_work_us=float(dur[all_work].sum()),
    )


def merge_intervals(
    starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of [start, end) intervals: merged starts and ends, and which input opened each.

    Sorted by start; an interval opens a new group when it starts more than `EPS_US` after
    every earlier one has ended (touching ones merge, and so do ones a float rounding apart).
    Vectorised: one sort, one running maximum.
    """
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    if not len(s):
        return s, e, order
    running_end = np.maximum.accumulate(e)
    first = np.flatnonzero(np.concatenate(([True], s[1:] > running_end[:-1] + EPS_US)))
    return s[first], np.maximum.reduceat(e, first), order[first]


def busy_table(work: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per device (pid): window, busy, compute, idle, gaps; and the table of gaps."""
    device_rows, gaps = _busy(work, np.arange(len(work)))
    return _devices_frame(device_rows), gaps


# The helpers below work on row positions (`rows`) into the frame they are given.


def _forward_count(spans: pd.DataFrame) -> int:
    return _per_unit(spans)[0]


def _per_unit(spans: pd.DataFrame) -> tuple[int, str]:
    """What the per-window figures divide by, and its word: a train run's attn_step spans (a
    forward and its backward), else attn_fwd spans, else ProfilerSteps."""
    if n := len(forward_rows(spans, STEP)):
        return n, "step"
    if n := len(forward_rows(spans, FORWARD)):
        return n, "forward"
    if n := len(step_rows(spans)):
        return n, "step"
    return 1, "trace"


def _active_rows(spans: pd.DataFrame) -> tuple[np.ndarray, str]:
    """Positions of `active_windows`, and its words."""
    rows = step_rows(spans)
    if len(rows):
        return rows, f"GPU work launched in the {counted(len(rows), 'active ProfilerStep')}"
    rows = forward_rows(spans, FORWARD)
    if len(rows):
        return rows, f"GPU work launched in the {counted(len(rows), 'attn_fwd span')}"
    return rows, "all GPU work (no ProfilerStep or attn_fwd spans in the trace)"


def _scoped_rows(spans: pd.DataFrame, windows: pd.DataFrame | None) -> tuple[np.ndarray, str]:
    """Positions of `scoped_work`, and its words. A cold-l2 run's L2 flush (launched in its
    `attn_l2_flush` spans) is no work of the run's: left out, its time reads as idle."""
    work = work_rows(spans)
    flush = forward_rows(spans, L2_FLUSH)
    if len(flush):
        work = np.setdiff1d(work, launched_rows(spans, work, flush))
    if windows is None:
        inside, scope = _active_rows(spans)
    else:
        scope = "GPU work launched in the given windows"
        if windows.empty:
            return work, scope
        inside = spans.index.get_indexer(windows.index)
    if not len(inside):
        return work, scope
    launched = launched_rows(spans, work, inside)
    if not len(launched) and len(work):
        return work, "all GPU work (no GPU work is linked to a launch in the active steps)"
    return launched, scope


def _busy(work: pd.DataFrame, rows: np.ndarray) -> tuple[list[dict], pd.DataFrame]:
    """busy_table for `rows` of `work`: the device rows as dicts (the headline reads one) and
    the gap table, longest first."""
    device, labels = _codes(work["pid"], rows)
    start = work["start_us"].to_numpy(float)[rows]
    end = work["end_us"].to_numpy(float)[rows]
    kernel = is_in(work["category"], "kernel")[rows]
    out: list[dict] = []
    parts: list[tuple] = []
    for code in np.unique(device[device >= 0]):  # groupby(sort=True)'s order, NaN dropped
        mine = np.flatnonzero(device == code)
        label = str(labels[code])
        starts, ends = start[mine], end[mine]
        ms, me, opener = merge_intervals(starts, ends)
        cs, ce, _ = merge_intervals(starts[kernel[mine]], ends[kernel[mine]])
        window = float(me[-1] - ms[0])
        busy = float((me - ms).sum())
        compute = float((ce - cs).sum())
        gap = ms[1:] - me[:-1]
        idle = float(gap.sum())
        out.append(
            {
                "device": label,
                "window_start_us": float(ms[0]),
                "window_end_us": float(me[-1]),
                "window_us": window,
                "busy_us": busy,
                "compute_us": compute,
                "memory_us": busy - compute,
                "idle_us": idle,
                "busy_pct": 100 * busy / window if window > 0 else None,
                "idle_pct": 100 * idle / window if window > 0 else None,
                "gaps": len(gap),
                "largest_gap_us": float(gap.max()) if len(gap) else 0.0,
                "work_items": len(mine),
            }
        )
        if len(gap):
            names = values_at(work["name"], rows[mine[opener[1:]]])  # the work that ends each gap
            nxt = [short_name(str(n)) for n in names]
            parts.append(([label] * len(gap), me[:-1], ms[1:], gap, nxt))
    if not parts:
        return out, pd.DataFrame(columns=GAP_COLUMNS)
    label, g_start, g_end, dur, nxt = (np.concatenate(c) for c in zip(*parts, strict=True))
    order = _descending(dur, "stable")
    gaps = {
        "device": label[order],
        "start_us": g_start[order],
        "end_us": g_end[order],
        "dur_us": dur[order],
        "next": nxt[order],
    }
    return out, pd.DataFrame(gaps)


def _devices_frame(device_rows: list[dict]) -> pd.DataFrame:
    if not device_rows:
        return pd.DataFrame(device_rows, columns=DEVICE_COLUMNS)
    columns = {c: np.array([r[c] for r in device_rows]) for c in DEVICE_COLUMNS}
    for c in ("busy_pct", "idle_pct"):  # None where the window is empty: NaN, or all None
        if columns[c].dtype == object and any(v is not None for v in columns[c]):
            columns[c] = columns[c].astype(float)
    return pd.DataFrame(columns)


def _codes(column: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, Any]:
    """`column`'s codes at `rows` (-1: missing) and each code's value, codes in sorted order
    (a categorical's category order): the groups and order of `groupby(sort=True)`."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.array.codes[rows], column.dtype.categories
    return pd.factorize(column.to_numpy()[rows], sort=True)


def _descending(values: np.ndarray, kind: str) -> np.ndarray:
    """The row order of `sort_values(ascending=False, kind=kind)`, ties broken as pandas does
    (it argsorts the reversed values, then reverses)."""
    return (len(values) - 1 - np.argsort(values[::-1], kind=kind))[::-1]


def launch_rows(stats: LaunchStats) -> list[tuple[str, str]]:
    """The headline figures as (label, text) pairs for the CLI and the page."""
    if not stats.has_gpu:
        return [("GPU busy", "n/a: no GPU events (a CPU-only trace)")]
    if stats.busy_pct is None:
        return [("GPU busy", f"n/a: no GPU work in scope ({stats.scope})")]
    rows = [
        ("scope", stats.scope),
        ("GPU busy", f"{stats.busy_pct:.1f}% of {stats.window_us:,.1f} µs "
                     f"(first to last GPU work, device {stats.device})"),
        ("GPU idle", f"{stats.idle_us:,.1f} µs in {stats.gaps:,} "
                     f"gap{'' if stats.gaps == 1 else 's'}, largest "
                     f"{stats.largest_gap_us:,.1f} µs"),
    ]  # fmt: skip
    if stats.launches:
        per = "in the trace" if stats.unit == "trace" else f"per {stats.unit}"
        rows += [
            ("CPU launch", f"mean {stats.cpu_launch_mean_us:,.1f} µs, max "
                           f"{stats.cpu_launch_max_us:,.1f} µs over {_calls_text(stats)}, "
                           f"{stats.cpu_launch_us_per_forward:,.1f} µs {per}"),
            ("launch delay", f"mean {stats.launch_delay_mean_us:,.1f} µs, max "
                             f"{stats.launch_delay_max_us:,.1f} µs (GPU start − launch end)"),
            ("launch → start", f"mean {stats.launch_to_start_mean_us:,.1f} µs, max "
                               f"{stats.launch_to_start_max_us:,.1f} µs "
                               "(GPU start − launch start)"),
        ]  # fmt: skip
    if stats.unlinked:
        rows.append(("not counted", _unlinked_text(stats)))
    return rows


def _calls_text(stats: LaunchStats) -> str:
    """'9 launch calls (3 cudaGraphLaunch starting 15 GPU items)': why calls ≠ GPU items."""
    text = f"{stats.launch_calls:,} launch call{'' if stats.launch_calls == 1 else 's'}"
    multi = [f"{calls:,} {name} starting {items:,} GPU items"
             for name, calls, items in stats.multi_launches]  # fmt: skip
    return f"{text} ({'; '.join(multi)})" if multi else text


def _unlinked_text(stats: LaunchStats) -> str:
    share = 100 * stats.unlinked_us / stats.gpu_work_us if stats.gpu_work_us > 0 else 0.0
    one = stats.unlinked == 1
    return (
        f"{stats.unlinked:,} GPU work item{'' if one else 's'}, {stats.unlinked_us:,.1f} µs "
        f"({share:.1f}% of all GPU work): no launch in the trace points to "
        f"{'it' if one else 'them'} (no CPU event has {'its' if one else 'their'} correlation "
        "id: launched before recording began, or by a call the trace did not record), so "
        f"{'it is' if one else 'they are'} in no {stats.unit}'s GPU figures, nor in these"
    )


def _opt(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
