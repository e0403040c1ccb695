"""The columns of the tables a run and an uploaded trace are shown as: name → header.

One definition each: the backend builds its frame with these names in this order, the views
show them under these headers, the CLI picks them by name. Plain constants (no torch), so the
trace analysis that uses them stays importable without torch.
"""

from __future__ import annotations

# torch.profiler's key_averages, one row per operator (profiling.run.export.operator_table).
OPERATOR_COLUMNS = {
    "operator": "Operator",
    "calls": "Calls",
    "cpu_self_us": "CPU self µs",
    "cpu_total_us": "CPU total µs",
    "cpu_avg_us": "CPU avg µs",
    "device_self_us": "GPU self µs",
    "device_total_us": "GPU total µs",
    "device_avg_us": "GPU avg µs",
}
# One row per GPU kernel, memcpy or memset name (profiling.kernels.names.kernel_table). The decoding
# comes right after the name: reading names is the lesson.
KERNEL_COLUMNS = {
    "kernel": "Kernel",
    "role": "Role in attention",
    "category": "Category",
    "decoded": "What the name says",
    "count": "Calls / fwd",
    "total_us": "µs / fwd",
    "pct_gpu": "% GPU time",
    "mean_us": "Mean µs",
    "min_us": "Min µs",
    "max_us": "Max µs",
    "registers_per_thread": "Registers / thread",
    "shared_memory": "Shared mem (B)",
    "grid": "Grid",
    "block": "Block",
    "occupancy_pct": "Est. occupancy %",
    "occupancy_note": "Occupancy note",
    "name": "Full name",
}
# per role in attention, per measured step (profiling.kernels.roles.role_table)
ROLE_COLUMNS = {
    "role": "Role",
    "us": "µs / step",
    "pct_gpu": "% GPU time",
    "calls": "Kernels / step",
    "kernels": "Kernels",
}
# cpu_op and record_function spans per name, read from any trace (profiling.analysis.analyze).
TRACE_OPERATOR_COLUMNS = {
    "operator": "Operator",
    "calls": "Calls",
    "total_us": "Total µs",
    "self_us": "Self µs",
    "mean_us": "Mean µs",
    "pct_self": "% of self time",
}
# One row per (kernel, role, phase) on the roofline (profiling.kernels.roofline.roofline_rows).
ROOFLINE_COLUMNS = {
    "kernel": "Kernel",
    "role": "Role",
    "phase": "Phase",
    "calls": "Calls",
    "mean_us": "µs / call",
    "flop_per_call": "FLOP / call",
    "bytes_per_call": "Bytes / call",
    "source": "Figures from",
    "tflops": "TFLOP/s",
    "tbps": "TB/s",
    "intensity": "FLOP/byte",
    "bound": "Bound",
    "roof": "Compute roof",
    "total_us": "Total µs",
    "name": "Full name",
}

# What a per-window header says, by what the table was divided by: a run's tables are per
# forward (kernels) or per measured step (roles); an upload without attn_fwd spans is counted
# over the whole trace, and its headers must say totals, not "/ fwd" (issue 31).
PER_HEADER = {"forward": " / fwd", "step": " / step", "trace": " (whole trace)"}
_PER_WINDOW = {"count": "Calls", "total_us": "µs", "us": "µs", "calls": "Kernels"}


def kernel_columns(unit: str = "forward") -> dict[str, str]:
    """KERNEL_COLUMNS with the per-window headers of `unit` (a PER_HEADER key)."""
    return _per(KERNEL_COLUMNS, unit)


def role_columns(unit: str = "step") -> dict[str, str]:
    """ROLE_COLUMNS with the per-window headers of `unit` (a PER_HEADER key)."""
    return _per(ROLE_COLUMNS, unit)


def _per(columns: dict[str, str], unit: str) -> dict[str, str]:
    return {c: f"{_PER_WINDOW[c]}{PER_HEADER[unit]}" if c in _PER_WINDOW else header
            for c, header in columns.items()}  # fmt: skip


# issue 36: what Nsight Compute measured, beside a kernel-table row (analysis/counters_join.py;
# per call, the mean of the calls matched). ncu's µs are ncu's: replayed, caches flushed.
MEASURED_KERNEL_COLUMNS = {
    "ncu_us": "ncu µs (replayed)",
    "dram_read_bytes": "DRAM read (B, ncu)",
    "dram_write_bytes": "DRAM written (B, ncu)",
    "tensor_pipe_pct": "Tensor pipe % (ncu)",
    "sm_throughput_pct": "SM % of peak (ncu)",
    "dram_throughput_pct": "DRAM % of peak (ncu)",
    "l2_hit_pct": "L2 hit % (ncu)",
}
# beside a roofline row: the measured DRAM bytes, the intensity they give, the gap in words
MEASURED_ROOFLINE_COLUMNS = {
    "measured_bytes_per_call": "DRAM bytes / call (ncu)",
    "measured_intensity": "FLOP/byte (ncu bytes)",
    "bytes_gap": "Modelled vs measured",
}
# Added last to Compare's glance table for runs with counters: DRAM per step, as ncu measured
GLANCE_COUNTER_COLUMNS = ["DRAM MB read (ncu)", "DRAM MB written (ncu)", "counters"]
