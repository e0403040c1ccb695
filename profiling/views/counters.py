"""What the Profile tab and the CLI show of a counter pass (issue 36): the kernel table and the
roofline with ncu's measured columns, and a block that says what ncu did, how long it took and
how the kernels were matched; or why there are no counters. Pure (no gradio, no torch).

ncu's durations are ncu's (each kernel replayed, caches flushed between passes) and stay in
their own columns: they are never mixed into the profiler's timings.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import pandas as pd

from profiling.analysis import counters_join as join
from profiling.analysis.columns import (
    KERNEL_COLUMNS,
    MEASURED_KERNEL_COLUMNS,
    MEASURED_ROOFLINE_COLUMNS,
)
from profiling.analysis.counters import Counters
from profiling.kernels.names import short_name
from profiling.text_tables import text_table
from profiling.views.shared import DIGITS, KERNEL_DIGITS, readable

MEASURED_DIGITS = {"ncu_us": DIGITS, "dram_read_bytes": None, "dram_write_bytes": None,
                   "tensor_pipe_pct": 1, "sm_throughput_pct": 1, "dram_throughput_pct": 1,
                   "l2_hit_pct": 1, "occupancy_pct": 1}  # fmt: skip
KERNEL_HEADERS = {
    **KERNEL_COLUMNS,
    "occupancy_pct": "Occupancy % (achieved where ncu measured, else est.)",
    **MEASURED_KERNEL_COLUMNS,
}
ROOFLINE_DIGITS = {"measured_bytes_per_call": None, "measured_intensity": 2}
TITLE = "Hardware counters (Nsight Compute)"


@dataclass
class Joined:
    """A run's counters laid beside its tables (`measured`: per phase and kernel name)."""

    counters: Counters
    measured: pd.DataFrame
    words: str  # how ncu's kernels were matched to the profiled ones


def joined(result: Any) -> Joined | None:
    """The run's counters matched to its profiled kernels; None when it asked for none."""
    counters = getattr(result, "counters", None)
    if counters is None:
        return None
    if not counters.measured:
        return Joined(counters, pd.DataFrame(columns=["phase", "name", *join.MEASURED]), "")
    measured, words = join.per_kernel(counters, result.trace.phases)
    return Joined(counters, measured, words)


def kernel_table(result: Any, measured: Joined) -> pd.DataFrame:
    """The kernel table with the measured columns (each phase's in turn, as phase_kernels)."""
    phases = result.trace.phases
    digits = {**KERNEL_DIGITS, **MEASURED_DIGITS}
    if len(phases) < 2:
        name = next(iter(phases), "")
        table = join.with_kernels(result.kernels, measured.measured, name)
        return readable(table, KERNEL_HEADERS, digits)
    tables = [
        readable(join.with_kernels(phase.kernels, measured.measured, name), KERNEL_HEADERS,
                 digits).assign(phase=name)
        for name, phase in phases.items()
    ]  # fmt: skip
    return pd.concat(tables, ignore_index=True)


def roofline_rows(rows: pd.DataFrame, measured: Joined) -> pd.DataFrame:
    """Roofline rows with the measured DRAM bytes, their intensity and the gap."""
    return join.with_roofline(rows, measured.measured)


def roofline_table(view: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The readable roofline table (`view`) with the measured columns of `rows` after it."""
    extra = readable(rows, MEASURED_ROOFLINE_COLUMNS, ROOFLINE_DIGITS)
    return pd.concat([view.reset_index(drop=True), extra], axis=1)


def counters_json(measured: Joined) -> dict[str, Any]:
    """The summary JSON's "counters": the figures per kernel, or the reason there are none."""
    counters = measured.counters
    read, written = join.step_bytes(counters)
    return {
        "measured": counters.measured,
        "reason": counters.reason,
        "seconds": round(counters.seconds, 2),
        "how": counters.how,
        "match": measured.words,
        "missing_metrics": counters.missing,
        "dram_read_bytes": read,
        "dram_write_bytes": written,
        "kernels": counters.kernels.drop(columns=["demangled"], errors="ignore")
        .astype(object)
        .where(counters.kernels.notna(), None)
        .to_dict(orient="records"),
    }


def counters_lines(measured: Joined) -> list[str]:
    """What ncu did and how long it took, or why there are no counters (plain text)."""
    counters = measured.counters
    if not counters.measured:
        return [f"no counters: {counters.reason}"]
    read, written = join.step_bytes(counters)
    lines = [
        f"the counter pass took {counters.seconds:.1f} s (a second process under ncu)",
        f"DRAM per step: {(read or 0) / 1e6:,.1f} MB read, {(written or 0) / 1e6:,.1f} MB written",
        measured.words,
        counters.how,
    ]
    if counters.missing:
        lines.append("not on this GPU: " + ", ".join(counters.missing))
    return lines


def counters_html(measured: Joined) -> str:
    """The block under the strip (counters_lines, escaped)."""
    body = " · ".join(html.escape(line) for line in counters_lines(measured))
    return f'<div id="counters-note"><b>{TITLE}</b>: {body}</div>'


CLI_COLUMNS = {"kernel": "kernel", "phase": "phase", "ncu_us": "ncu µs", "dram_read_bytes":
               "DRAM read MB", "dram_write_bytes": "DRAM written MB", "achieved_occupancy_pct":
               "occupancy %", "tensor_pipe_pct": "tensor %", "sm_throughput_pct": "SM %",
               "dram_throughput_pct": "DRAM %", "l2_hit_pct": "L2 hit %"}  # fmt: skip


def counters_text(result: Any) -> str:
    """The CLI's counters: the block's lines, then ncu's figures per kernel (per call)."""
    measured = joined(result)
    if measured is None:
        return ""
    lines = [f"{TITLE}:", *(f"  {line}" for line in counters_lines(measured))]
    if measured.counters.measured:
        table = measured.measured.assign(kernel=measured.measured["name"].map(short_name))
        for column in ("dram_read_bytes", "dram_write_bytes"):
            table[column] = table[column] / 1e6
        shown = readable(table, CLI_COLUMNS, {c: 1 for c in list(CLI_COLUMNS)[2:]})
        lines += ["", text_table(shown, 48)]
    return "\n".join(lines) + "\n"
