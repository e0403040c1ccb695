"""What the Compare tab shows: the "at a glance" table, the note over it, the two figures.

Pure functions (no gradio). The variants offered here are Sweep's too; a Compare request is
checked in profiling.workload.request.
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from profiling.analysis.columns import GLANCE_COUNTER_COLUMNS as COUNTER_COLUMNS
from profiling.analysis.columns import ROOFLINE_COLUMNS
from profiling.analysis.peaks import peaks_table
from profiling.analysis.role_views import role_matrix
from profiling.gantt.spec import FigureSpec
from profiling.jobs.compare import (
    GLANCE_COLUMNS,
    POST_VARIANTS,
    TRAINING_COLUMNS,
    CompareResult,
    default_variants,
)
from profiling.text_tables import shape_text
from profiling.views.compare_figures import gpu_cpu_bars, mini_gantts
from profiling.views.ran_on import on_device, run_devices
from profiling.views.roofline_figure import roofline_spec
from profiling.views.shared import Columns, significant, without_nan
from profiling.views.text.summary import sdpa_rows
from profiling.workload.availability import unavailable_reasons, zero_gpu
from profiling.workload.spec import device_key

log = logging.getLogger(__name__)
DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


# -- defaults -------------------------------------------------------------------------------
def compare_defaults(device: str, dtype: str) -> list[str]:
    """What the Compare tab preselects: the variants Compare runs when none is named (the
    post's six plus the Hub kernels where they run) that can run here, so a first click on a
    CPU does not list two rows of "needs a CUDA GPU". When that cannot be checked: on ZeroGPU
    (CUDA emulated outside the slot, availability.checked_reason) the six, which the job checks
    again inside; elsewhere those of the six whose own check says they can run."""
    try:
        defaults = default_variants(device, dtype)
    except Exception:
        if zero_gpu():
            return list(POST_VARIANTS)
        log.warning("the default variants could not be checked", exc_info=True)
        defaults = list(POST_VARIANTS)
    reasons = unavailable_reasons(device, dtype)
    return [variant for variant in defaults if not reasons.get(variant)]


# -- the at-a-glance table ------------------------------------------------------------------
# On a CPU "decoded" only ever says "CPU operator with the most self time": left out too.
GLANCE_CPU = ["variant", "status", "CPU µs/fwd", "TFLOP/s", "rel. err", "ran", "dominant kernel",
              "reason"]  # fmt: skip
GLANCE_TEXT = {"variant", "status", "bound", "ran", "dominant kernel", "decoded", "reason",
               "roofline"}  # fmt: skip
GLANCE_WIDE = {"variant": 130, "status": 110, "ran": 150, "dominant kernel": 250, "roofline": 220,
               "decoded": 300, "reason": 380}  # fmt: skip
GLANCE_CPU_SHARES = {"variant": 11, "status": 9, "CPU µs/fwd": 8, "TFLOP/s": 8, "rel. err": 7,
                     "ran": 11, "dominant kernel": 18, "reason": 28}  # fmt: skip
GLANCE_DIGITS = {"kernels/fwd": 2, "GPU µs/fwd": 1, "CPU µs/fwd": 1, "peak MiB": 1,
                 "% of peak": 1, "GPU busy %": 1, "launch delay µs": 1,
                 "CPU launch µs/fwd": 1, "fwd GPU µs": 1, "bwd GPU µs": 1, "fwd CPU µs": 1,
                 "bwd CPU µs": 1, "saved MiB": 1, "% of BW peak": 1,
                 "DRAM MB read (ncu)": 1, "DRAM MB written (ncu)": 1}  # fmt: skip
GLANCE_SIGNIFICANT = {"TFLOP/s": 3, "TB/s": 3, "rel. err": 2, "dQ err": 2, "dK err": 2, "dV err": 2}


def glance_columns(device: str) -> list[str]:
    """The "at a glance" columns: all of them on a GPU; on a CPU the GPU-only ones are left out."""
    return list(GLANCE_COLUMNS) if device_key(device) == "cuda" else list(GLANCE_CPU)


def glance_datatypes(device: str) -> list[str]:
    return ["str" if c in GLANCE_TEXT else "number" for c in glance_columns(device)]


def glance_widths(device: str, columns: list[str] | None = None) -> list[int | str]:
    """A GPU's columns, and a training run's on any device, scroll sideways (pixels); a CPU's
    8 of a forward fit the page (shares of it). `columns`: those shown (default: a forward's)."""
    columns = glance_columns(device) if columns is None else columns
    if device_key(device) == "cpu" and set(columns) <= set(GLANCE_CPU_SHARES):
        return [f"{GLANCE_CPU_SHARES[c]}%" for c in columns]
    return [GLANCE_WIDE.get(c, 96) for c in columns]


def glance_layout(device: str) -> Columns:
    """The glance table's layout for a forward's columns (fit_glance widens it for more)."""
    return Columns(glance_columns(device), glance_datatypes(device), glance_widths(device))


PER_SHORT = {"forward": "fwd", "backward": "bwd", "train": "step"}  # what a "/fwd" column is per


def glance_view(glance: pd.DataFrame, device: str, mode: str = "forward") -> pd.DataFrame:
    """The glance table as shown: the device's columns, numbers rounded, gaps left empty, and
    the "/fwd" columns named for what they count in `mode` ("CPU µs/step" for a train step)."""
    columns = glance_columns(device)
    if TRAINING_COLUMNS[0] in glance:  # a run with a backward: its phases beside "rel. err"
        at = columns.index("rel. err") + 1
        phases = [c for c in TRAINING_COLUMNS if device_key(device) == "cuda" or "GPU" not in c]
        columns = [*columns[:at], *phases, *columns[at:]]
    columns += [c for c in COUNTER_COLUMNS if c in glance]  # issue 36: ncu's bytes, last
    table = glance.reindex(columns=columns).copy()
    for column, digits in GLANCE_DIGITS.items():
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").round(digits)
    for column, digits in GLANCE_SIGNIFICANT.items():
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").map(
                lambda v, d=digits: significant(v, d)
            )
    if "idle gaps" in table:
        table["idle gaps"] = pd.to_numeric(table["idle gaps"], errors="coerce").astype(float)
    text = [c for c in table.columns if c in GLANCE_TEXT]
    table[text] = table[text].fillna("")
    per = f"/{PER_SHORT.get(mode, 'fwd')}"
    table.columns = [c.removesuffix("/fwd") + per if c.endswith("/fwd") else c for c in table]
    return without_nan(table.reset_index(drop=True))


def peak_note(result: CompareResult) -> str:
    """Which datasheet peak "% of peak" divides by, named as such (or why there is none)."""
    dtype = result.shape.get("dtype", "")
    if result.device != "cuda":
        return "% of peak: no datasheet peak for this device (a CPU run)"
    if result.peak is None:
        return f"% of peak: no datasheet peak for this device ({result.device_name})"
    value = result.peak.tflops.get(dtype)
    if value is None:
        return f"% of peak: no datasheet peak for {dtype} on {result.peak.device}"
    return (
        f"% of peak: NVIDIA datasheet dense {DTYPE_SHORT.get(dtype, dtype)} {value:g} TFLOP/s "
        f"for {result.peak.device}"
    )


def compare_note(result: CompareResult) -> str:
    """Markdown over the table: device and shape, the peak used, the TFLOP/s basis, and each
    variant that did not run with its reason (the table's last column repeats it)."""
    head = (
        f"**{len(result.ran)} of {len(result.runs)} variants ran** on {result.device_name} at "
        f"{shape_text(result.shape)}."
    )
    peak, _, rest = peak_note(result).partition(": ")
    items = [f"**{peak}:** {rest}" + (f" ({result.peak.source})" if result.peak else "")]
    items += [n for n in result.notes if not n.startswith("% of peak")]
    items += [f"not run — `{r.variant}` ({r.status}): {r.reason}" for r in result.runs if not r.ok]
    items += sdpa_lines(result)
    # our own Markdown (bold, code) around text from the app and torch: HTML escaped only
    text = [html.escape(t, quote=False) for t in (head, *items)]
    return "\n".join([text[0], "", *(f"- {t}" for t in text[1:])])


def sdpa_lines(result: CompareResult) -> list[str]:
    """Each SDPA variant that ran: torch's checks of each backend and its pick, for its inputs."""
    lines = []
    for run in result.ran:
        rows = dict(sdpa_rows(run.summary)) if run.summary else {}
        if rows:
            checks, picks = rows["SDPA's checks"], rows["SDPA picks"]
            lines.append(f"`{run.variant}`: SDPA picks {picks} · {checks}")
    return lines


def no_roles_note(roles: pd.DataFrame | None) -> str:
    """Why the variants × roles table is left out (no variant ran a GPU kernel, so it would
    hold a lone "variant" column), or "" where it has roles."""
    if roles is not None and len(roles) and len(roles.columns) > 1:
        return ""
    return "**Kernels by role:** no GPU kernels ran (a CPU run has none), so no roles to show."


def peaks_view() -> pd.DataFrame:
    """The datasheet table shown in the page's accordion."""
    return peaks_table()


@dataclass
class ComparePage:
    """Everything the Compare event shows, in the order of its outputs, plus the Diff state."""

    glance: pd.DataFrame
    note: str
    bars: go.Figure
    gantts: go.Figure
    zip_path: Path | None
    traces: dict[str, str] = field(default_factory=dict)  # variant → .json.gz, server side
    roles: pd.DataFrame = field(default_factory=pd.DataFrame)  # variants × roles, µs / step
    roofline: FigureSpec | None = None  # every variant's attention kernels on one roofline


def compare_page(result: CompareResult, device: str) -> ComparePage:
    """CompareResult → what the tab shows; figures are built here, outside any GPU slot."""
    bars = gpu_cpu_bars(result)
    bars.update_layout(height=420)
    traces = {r.variant: str(r.trace_gz) for r in result.ran if r.trace_gz and r.trace_gz.exists()}
    return ComparePage(
        glance=glance_view(result.glance, device, result.shape.get("mode", "forward")),
        note=compare_note(result),
        bars=bars,
        gantts=mini_gantts(result),
        zip_path=result.zip_path,
        traces=traces,
        roles=role_matrix((r.variant, r.roles) for r in result.ran).round(1),
        roofline=compare_roofline(result),
    )


def compare_roofline(result: CompareResult) -> FigureSpec:
    """Every variant's kernels that have a role in attention, on one roofline."""
    placed = zip(result.runs, run_devices([r.placement for r in result.runs]), strict=True)
    rows = [
        r.roofline[r.roofline["role"] != ""].assign(variant=on_device(r.variant, device))
        for r, device in placed
        if r.ok and r.roofline is not None and not r.roofline.empty
    ]  # a mixed cluster: each variant's points named with the device they ran on
    points = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=[*ROOFLINE_COLUMNS, "variant"]
    )  # fmt: skip
    return roofline_spec(points, result.device_name, result.shape.get("dtype", ""), own_run=True)
