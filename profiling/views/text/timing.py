"""Issue 23's figures as text: how the steps were timed, their spread, eager vs CUDA graph, the
GPU's clocks and the memory timeline's peak. (label, text) rows, one formatting for the CLI,
the page's strip and the docs (summary_text.summary_rows appends them); torch-free.
"""

from __future__ import annotations

from typing import Any

from profiling.analysis.spread import spread_text
from profiling.analysis.summary import Summary

TIMING_TEXT = {
    "eager": "eager (each kernel launched by the CPU, as in training code)",
    "cuda-graph": "CUDA graph (each phase captured once, replayed: no CPU launch cost)",
    "cold-l2": "cold L2 (a buffer larger than the L2 written before each step)",
}
NO_GPU_MEMORY = "n/a (needs a GPU: the CUDA allocator's history)"


def timing_rows(summary: Summary, per: str) -> list[tuple[str, str]]:
    """The timing mode, the spread per step, eager vs graph, clocks and memory."""
    rows = [("timing", TIMING_TEXT.get(summary.timing, summary.timing))]
    spread = summary.step_spread or {}
    for key, label in (("gpu_us", "GPU"), ("cpu_us", "CPU")):
        if spread.get(key):
            rows.append((f"{label} µs / {per}, median (IQR)", spread_text(spread[key])))
    if summary.launch_compare:
        rows.append(("eager vs CUDA graph", compared_text(summary.launch_compare)))
    rows.append(("GPU clocks", clocks_text(summary.gpu_clocks)))
    rows.append(("memory timeline", memory_text(summary.memory, summary.device)))
    return rows


def compared_text(compared: dict[str, Any]) -> str:
    """`host 82.3 → 25.0 µs to issue a step; 70.9 → 64.0 µs per step back to back`."""
    eager, graph = compared["eager"], compared["cuda-graph"]
    return (
        f"host {eager['host_us']['median']:,.1f} → {graph['host_us']['median']:,.1f} µs to "
        f"issue a step; {eager['wall_us']:,.1f} → {graph['wall_us']:,.1f} µs per step back to "
        "back (no profiler)"
    )


def clocks_text(clocks: dict[str, Any] | None) -> str:
    """`SM 1980–1980 MHz (max 1980), memory 3201 MHz, 93–129 W, ≤ 36 °C, 9 samples`."""
    if not clocks:
        return "n/a"
    if not clocks.get("available"):
        return f"n/a ({clocks.get('reason', 'not sampled')})"
    text = f"SM {clocks['sm_mhz_min']}–{clocks['sm_mhz_max']} MHz"
    if clocks.get("sm_mhz_device_max"):
        text += f" (max {clocks['sm_mhz_device_max']})"
    text += f", memory {clocks['mem_mhz_min']}–{clocks['mem_mhz_max']} MHz"
    if clocks.get("power_w_max") is not None:
        text += f", ≤ {clocks['power_w_max']:.0f} W"
    if clocks.get("temp_c_max") is not None:
        text += f", ≤ {clocks['temp_c_max']} °C"
    text += f", {clocks['samples']} samples"
    if clocks.get("reasons"):
        text += "; reasons: " + ", ".join(clocks["reasons"])
    if clocks.get("warning"):
        text += f"; WARNING: {clocks['warning']}"
    return text


def memory_text(memory: dict[str, Any] | None, device: str) -> str:
    """`peak 753.0 MiB (max_memory_allocated 753.0 MiB), 225.0 before the step`."""
    if device != "cuda":
        return NO_GPU_MEMORY
    if not memory:
        return "n/a"
    if memory.get("error"):
        return f"n/a ({memory['error']})"
    return (
        f"peak {memory['peak_mib']:,.1f} MiB over one step (max_memory_allocated "
        f"{memory['max_memory_allocated_mib']:,.1f} MiB), {memory['baseline_mib']:,.1f} MiB "
        "before it"
    )
