"""What bounds a run, read off the roofline at the run's level: the bytes it must move and the
FLOPs it must do, against the device's datasheet peaks.

A decode step (one query against a KV cache of thousands) does about one multiply-add per byte
of K and V it reads: far below the H200's ridge of ~206 FLOP/byte, so memory bandwidth bounds
it; a prefill does hundreds per byte and is bound by the tensor cores. The bytes are a floor:
q, k, v read once and the output written once (a backward reads q, k, v, the output and its
gradient and writes three gradients: about twice that; a train step three times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from profiling.analysis.peaks import peak_bandwidth, peak_tflops

BYTES_PER_MODE = {"forward": 1, "backward": 2, "train": 3}  # × a forward's q, k, v, out
FAR_FROM_BOTH = 10.0  # % of either peak under which neither roof is what limits the run


@dataclass(frozen=True)
class RunBound:
    bytes_moved: int
    intensity: float  # FLOP per byte that must move
    tbps: float | None  # achieved, over the GPU time (None without GPU time)
    pct_peak_tflops: float | None
    pct_peak_bandwidth: float | None
    bound: str  # "memory", "compute", "neither …", or why it cannot be said


def run_bound(
    flops: float, io_bytes: int, mode: str, gpu_us: float | None, device_name: str, dtype: str
) -> RunBound:
    """The run's place on the roofline of `device_name` (the datasheet peaks)."""
    moved = io_bytes * BYTES_PER_MODE.get(mode, 1)
    intensity = flops / moved if moved else float("inf")
    peak_flops, bandwidth = peak_tflops(device_name, dtype), peak_bandwidth(device_name)
    if not gpu_us:
        return RunBound(moved, intensity, None, None, None, "n/a (no GPU time)")
    seconds = gpu_us * 1e-6
    tbps = moved / seconds / 1e12
    if peak_flops is None or bandwidth is None:
        bound = "n/a (no datasheet peaks for this device)"
        return RunBound(moved, intensity, tbps, None, None, bound)
    pct_flops = 100 * flops / seconds / 1e12 / peak_flops
    pct_bandwidth = 100 * tbps / bandwidth
    ridge = peak_flops / bandwidth  # FLOP per byte where the two roofs meet
    roof = "memory" if intensity < ridge else "compute"
    if max(pct_flops, pct_bandwidth) < FAR_FROM_BOTH:
        bound = f"neither: {roof} roof by intensity, but under {FAR_FROM_BOTH:.0f}% of both peaks"
    else:
        bound = roof
    return RunBound(moved, intensity, tbps, pct_flops, pct_bandwidth, bound)


def ridge_text(device_name: str, dtype: str) -> str:
    """`ridge 206 FLOP/byte (989.4 TFLOP/s ÷ 4.8 TB/s)`, or empty without datasheet peaks."""
    peak_flops, bandwidth = peak_tflops(device_name, dtype), peak_bandwidth(device_name)
    if peak_flops is None or bandwidth is None:
        return ""
    ridge = peak_flops / bandwidth
    return f"ridge {ridge:,.0f} FLOP/byte ({peak_flops:g} TFLOP/s ÷ {bandwidth:g} TB/s)"


def cpu_or_gpu_bound(cpu_us: float | None, gpu_us: float | None) -> str:
    """CPU-bound when the CPU spends longer per forward than the GPU works (the post's test)."""
    if gpu_us is None or cpu_us is None or math.isnan(cpu_us) or math.isnan(gpu_us):
        return "n/a"
    return "CPU-bound" if cpu_us > gpu_us else "GPU-bound"
