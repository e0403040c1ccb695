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
  merge, as in HTA's `merge_kernel_intervals`). Idle = window − busy = the sum of the gaps.
  Compute = the union of kernels only; memory = busy − compute (HTA's `non_compute_time`).
- CPU launch duration: the duration of the runtime/driver span linked to the GPU work by its
  correlation id (`cudaLaunchKernel`, `cuLaunchKernelEx`, `cudaMemcpyAsync`, ...).
- Launch delay: GPU start − end of that launch span, clipped at 0 (HTA's `launch_delay`).
  Launch→start: GPU start − start of the launch span (not clipped): the whole trip from the
  moment the CPU began launching to the moment the GPU began running.

One difference from HTA, deliberate: HTA's launch stats know only `cudaLaunchKernel`,
`cudaLaunchKernelExC`, `cudaMemcpyAsync` and `cudaMemsetAsync`; kernels launched through the
driver API are missing from its table: `cuLaunchKernel` (every Triton kernel: flex, compiled
naive) and `cuLaunchKernelEx` (cuBLAS's nvjet GEMMs, cuDNN's attention on Hopper). Here every
linked launch counts; `launch_api` says which one it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiling.kernels import short_name
from profiling.summary import forward_spans, gpu_work, launched_within
from profiling.trace import Trace

DEVICE_COLUMNS = [
    "device", "window_start_us", "window_end_us", "window_us", "busy_us", "compute_us",
    "memory_us", "idle_us", "busy_pct", "idle_pct", "gaps", "largest_gap_us", "work_items",
]  # fmt: skip
GAP_COLUMNS = ["device", "start_us", "end_us", "dur_us", "next"]
LAUNCH_COLUMNS = [
    "kernel", "category", "launch_api", "correlation", "step", "launch_start_us",
    "cpu_launch_us", "gpu_start_us", "gpu_us", "launch_delay_us", "launch_to_start_us", "name",
]  # fmt: skip
PER_KERNEL_COLUMNS = [
    "kernel", "category", "launch_api", "count", "cpu_launch_mean_us", "cpu_launch_max_us",
    "launch_delay_mean_us", "launch_delay_max_us", "launch_to_start_mean_us",
    "launch_to_start_max_us", "gpu_mean_us", "name",
]  # fmt: skip


@dataclass
class LaunchStats:
    """GPU busy/idle and launch figures of one trace; plain data, picklable."""

    scope: str  # which windows selected the GPU work, in words
    forwards: int  # divisor for the per-forward figures (attn_fwd spans, else steps, else 1)
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
    cpu_launch_mean_us: float | None
    cpu_launch_max_us: float | None
    cpu_launch_us_per_forward: float | None
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


def active_windows(trace: Trace) -> tuple[pd.DataFrame, str]:
    """The CPU windows whose launches are in scope: active steps, else forwards, else none."""
    steps = trace.steps()
    if not steps.empty:
        return steps, f"GPU work launched in the {len(steps)} active ProfilerSteps"
    forwards = forward_spans(trace)
    if not forwards.empty:
        return forwards, f"GPU work launched in the {len(forwards)} attn_fwd spans"
    return steps, "all GPU work (no ProfilerStep or attn_fwd spans in the trace)"


def forward_count(trace: Trace) -> int:
    """attn_fwd spans, else ProfilerSteps, else 1: what 'per forward' divides by."""
    return len(forward_spans(trace)) or len(trace.steps()) or 1


def scoped_work(trace: Trace, windows: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """GPU work in scope and the words for it (see the module docstring)."""
    scope = "GPU work launched in the given windows"
    if windows is None:
        windows, scope = active_windows(trace)
    work = gpu_work(trace)
    if windows.empty:
        return work, scope
    inside = launched_within(trace, windows)
    if inside.empty and not work.empty:
        return work, "all GPU work (no GPU work is linked to a launch in the active steps)"
    return inside, scope


def launch_stats(trace: Trace, windows: pd.DataFrame | None = None) -> LaunchStats:
    """Busy/idle per device and launch figures per GPU work item, kernel name and overall."""
    work, scope = scoped_work(trace, windows)
    forwards = forward_count(trace)
    devices, gaps = busy_table(work)
    per_launch = launch_table(trace, work)
    per_kernel = per_kernel_table(per_launch)
    head = devices.sort_values("busy_us", ascending=False).iloc[0] if len(devices) else None
    n = len(per_launch)

    def agg(column: str, how: str) -> float | None:
        return float(getattr(per_launch[column], how)()) if n else None

    return LaunchStats(
        scope=scope,
        forwards=forwards,
        has_gpu=trace.has_gpu,
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
        cpu_launch_mean_us=agg("cpu_launch_us", "mean"),
        cpu_launch_max_us=agg("cpu_launch_us", "max"),
        cpu_launch_us_per_forward=float(per_launch["cpu_launch_us"].sum()) / forwards
        if n
        else None,
        launch_delay_mean_us=agg("launch_delay_us", "mean"),
        launch_delay_max_us=agg("launch_delay_us", "max"),
        launch_to_start_mean_us=agg("launch_to_start_us", "mean"),
        launch_to_start_max_us=agg("launch_to_start_us", "max"),
        devices=devices,
        gap_table=gaps,
        per_launch=per_launch,
        per_kernel=per_kernel,
    )


def merge_intervals(
    starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of [start, end) intervals: merged starts and ends, and which input opened each.

    Sorted by start; an interval opens a new group when it starts after every earlier one has
    ended (touching intervals merge). Vectorised: one sort, one running maximum.
    """
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    if not len(s):
        return s, e, order
    running_end = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, s[1:] > running_end[:-1]])
    return s[first], np.maximum.reduceat(e, first), order[first]


def busy_table(work: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per device (pid): window, busy, compute, idle, gaps; and the table of gaps."""
    rows: list[dict] = []
    gap_frames: list[pd.DataFrame] = []
    for device, group in work.groupby("pid", sort=True, observed=True):
        starts, ends = group["start_us"].to_numpy(float), group["end_us"].to_numpy(float)
        ms, me, opener = merge_intervals(starts, ends)
        kernels = (group["category"] == "kernel").to_numpy()
        cs, ce, _ = merge_intervals(starts[kernels], ends[kernels])
        window = float(me[-1] - ms[0])
        busy = float((me - ms).sum())
        compute = float((ce - cs).sum())
        gap = ms[1:] - me[:-1]
        idle = float(gap.sum())
        rows.append(
            {
                "device": str(device),
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
                "work_items": len(group),
            }
        )
        if len(gap):
            names = group["name"].to_numpy()[opener[1:]]  # the work that ends each gap
            nxt = [short_name(str(n)) for n in names]
            gap_frames.append(
                pd.DataFrame(
                    {
                        "device": str(device),
                        "start_us": me[:-1],
                        "end_us": ms[1:],
                        "dur_us": gap,
                        "next": nxt,
                    }
                )
            )
    devices = pd.DataFrame(rows, columns=DEVICE_COLUMNS)
    gaps = (
        pd.concat(gap_frames, ignore_index=True)
        .sort_values("dur_us", ascending=False, kind="stable")
        .reset_index(drop=True)
        if gap_frames
        else pd.DataFrame(columns=GAP_COLUMNS)
    )
    return devices, gaps


def launch_table(trace: Trace, work: pd.DataFrame) -> pd.DataFrame:
    """One row per GPU work item that has a linked launch span, in launch order."""
    linked = work[work["link"] >= 0]
    if linked.empty:
        return pd.DataFrame(columns=LAUNCH_COLUMNS)
    launch = trace.spans.iloc[linked["link"].to_numpy()]
    l_start = launch["start_us"].to_numpy(float)
    l_dur = launch["dur_us"].to_numpy(float)
    g_start = linked["start_us"].to_numpy(float)
    table = pd.DataFrame(
        {
            "kernel": linked["name"].map(short_name).to_numpy(),
            "category": linked["category"].to_numpy(),
            "launch_api": launch["name"].to_numpy(),
            "correlation": linked["correlation"].to_numpy(),
            "step": linked["step"].to_numpy(),
            "launch_start_us": l_start,
            "cpu_launch_us": l_dur,
            "gpu_start_us": g_start,
            "gpu_us": linked["dur_us"].to_numpy(float),
            "launch_delay_us": np.clip(g_start - (l_start + l_dur), 0.0, None),
            "launch_to_start_us": g_start - l_start,
            "name": linked["name"].astype(str).to_numpy(),
        }
    )
    return table.sort_values("launch_start_us", kind="stable").reset_index(drop=True)


def per_kernel_table(per_launch: pd.DataFrame) -> pd.DataFrame:
    """Launch figures aggregated per GPU work name, in the order of first launch."""
    if per_launch.empty:
        return pd.DataFrame(columns=PER_KERNEL_COLUMNS)
    g = per_launch.groupby("name", sort=False)
    table = pd.DataFrame(
        {
            "kernel": g["kernel"].first(),
            "category": g["category"].first(),
            "launch_api": g["launch_api"].agg(lambda s: ", ".join(dict.fromkeys(s))),
            "count": g.size(),
            "cpu_launch_mean_us": g["cpu_launch_us"].mean(),
            "cpu_launch_max_us": g["cpu_launch_us"].max(),
            "launch_delay_mean_us": g["launch_delay_us"].mean(),
            "launch_delay_max_us": g["launch_delay_us"].max(),
            "launch_to_start_mean_us": g["launch_to_start_us"].mean(),
            "launch_to_start_max_us": g["launch_to_start_us"].max(),
            "gpu_mean_us": g["gpu_us"].mean(),
        }
    )
    table["name"] = table.index.to_numpy()
    return table.reset_index(drop=True)[PER_KERNEL_COLUMNS]


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
        ("GPU idle", f"{stats.idle_us:,.1f} µs in {stats.gaps} gaps, largest "
                     f"{stats.largest_gap_us:,.1f} µs"),
    ]  # fmt: skip
    if stats.launches:
        rows += [
            ("CPU launch", f"mean {stats.cpu_launch_mean_us:.1f} µs, max "
                           f"{stats.cpu_launch_max_us:.1f} µs, "
                           f"{stats.cpu_launch_us_per_forward:.1f} µs per forward"),
            ("launch delay", f"mean {stats.launch_delay_mean_us:.1f} µs, max "
                             f"{stats.launch_delay_max_us:.1f} µs (GPU start − launch end)"),
            ("launch → start", f"mean {stats.launch_to_start_mean_us:.1f} µs, max "
                               f"{stats.launch_to_start_max_us:.1f} µs (GPU start − launch start)"),
        ]  # fmt: skip
    return rows


def _opt(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
