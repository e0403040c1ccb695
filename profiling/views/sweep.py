"""What the Sweep tab shows: time and memory against the sequence length (two log–log charts)
and the table of points, refused and failed ones included.

Pure functions (no gradio); a Sweep request is checked in profiling.workload.request.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from profiling.jobs.sweep import STEP_PEAK, SWEEP_COLUMNS, SweepResult
from profiling.views.compare_figures import sweep_memory_figure, sweep_time_figure
from profiling.views.shared import Columns, significant, without_nan
from profiling.workload.availability import unavailable_reasons
from profiling.workload.request import doubling
from profiling.workload.spec import device_key

SWEEP_DEFAULT_VARIANTS = ("naive", "sdpa-flash", "sdpa-cudnn")
SWEEP_DEFAULT_LENGTHS = {"cuda": doubling(256, 16384), "cpu": [256, 512, 1024]}


def sweep_defaults(device: str, dtype: str) -> list[str]:
    """naive, sdpa-flash and sdpa-cudnn, those that can run here."""
    reasons = unavailable_reasons(device, dtype)
    return [v for v in SWEEP_DEFAULT_VARIANTS if not reasons.get(v)]


def sweep_default_lengths(device: str) -> list[int]:
    return list(SWEEP_DEFAULT_LENGTHS[device_key(device)])


SWEEP_GPU_ONLY = ("GPU µs/fwd", "peak MiB")  # empty on a CPU: left out there
SWEEP_CPU_ONLY = (STEP_PEAK,)  # empty on a GPU (its peak is max_memory_allocated)


def sweep_columns(device: str) -> list[str]:
    left_out = SWEEP_GPU_ONLY if device_key(device) == "cpu" else SWEEP_CPU_ONLY
    return [c for c in SWEEP_COLUMNS if c not in left_out]


def sweep_datatypes(device: str) -> list[str]:
    return [
        "str" if c in ("variant", "status", "reason") else "number" for c in sweep_columns(device)
    ]


# Widths that keep every header on one line per word ("seq_len" broke into "seq_l / en") and
# give the reason, which wraps, the rest. A GPU's nine columns scroll sideways (pixels); a
# CPU's eight fit the page (shares of it: no header breaks from a table about 800 px wide).
SWEEP_WIDE = {"variant": 150, "seq_len": 90, "status": 110, "reason": 380}  # others 96
SWEEP_CPU_SHARES = {"variant": 13, "seq_len": 9, "status": 10, "CPU µs/fwd": 11, STEP_PEAK: 9,
                    "est. MiB": 9, "TFLOP/s": 9, "reason": 30}  # fmt: skip


def sweep_widths(device: str) -> list[int | str]:
    if device_key(device) == "cuda":
        return [SWEEP_WIDE.get(c, 96) for c in sweep_columns("cuda")]
    return [f"{SWEEP_CPU_SHARES[c]}%" for c in sweep_columns("cpu")]


def sweep_layout(device: str) -> Columns:
    """The points table's layout: the reason wraps, in full."""
    return Columns(sweep_columns(device), sweep_datatypes(device), sweep_widths(device))


@dataclass
class SweepPage:
    time: go.Figure
    memory: go.Figure
    table: pd.DataFrame
    zip_path: Path | None


def sweep_view(table: pd.DataFrame, device: str) -> pd.DataFrame:
    """The points as shown: the device's columns, numbers rounded, reasons in full."""
    out = table.reindex(columns=sweep_columns(device)).copy()
    for c in ("GPU µs/fwd", "CPU µs/fwd", "peak MiB", STEP_PEAK, "est. MiB"):
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce").round(1)
    out["TFLOP/s"] = pd.to_numeric(out["TFLOP/s"], errors="coerce").map(lambda v: significant(v, 3))
    out["reason"] = out["reason"].fillna("")
    return without_nan(out.reset_index(drop=True))


def sweep_page(result: SweepResult, device: str) -> SweepPage:
    """SweepResult → the two log–log charts, the table and the zip; built outside the GPU slot."""
    time_fig, memory_fig = sweep_time_figure(result), sweep_memory_figure(result)
    return SweepPage(time_fig, memory_fig, sweep_view(result.table, device), result.zip_path)
