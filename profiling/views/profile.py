"""What the Profile tab shows, computed from a ProfileResult: the variant's lesson, the banner,
the summary strip, the operator and kernel tables, the Gantt.

Pure functions (no gradio), so the page, the API and the tests see the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.columns import OPERATOR_COLUMNS
from profiling.analysis.launch import LaunchStats
from profiling.analysis.role_views import as_records
from profiling.analysis.roofline_runs import run_roofline
from profiling.analysis.summary import Summary, finite
from profiling.gantt.spec import FigureSpec
from profiling.text_tables import text_table
from profiling.views import counters as views_counters
from profiling.views.roofline_figure import roofline_spec
from profiling.views.shared import (  # operator_*: the CLI's `history show` reads them too
    Columns,
    escaped,
    kernel_view,
    launch_html,
    operator_columns,
    operator_view,
    role_view,
    roofline_view,
)
from profiling.views.text.summary import sdpa_account_rows, summary_rows, training_rows, unit
from profiling.views.timing import (
    memory_figure,
    memory_note,
    memory_table,
    timeline_json,
    timing_html,
)
from profiling.workload.availability import unavailable_reasons, variant_spec, variant_specs


def variant_choices(device: str, dtype: str, mode: str = "forward") -> list[tuple[str, str]]:
    """(label, id) pairs for every variant picker (Profile, Compare, Sweep): the variant's label,
    and for an unavailable one the reason too."""
    reasons = unavailable_reasons(device, dtype, mode)
    out = []
    for variant_id, spec in variant_specs().items():
        why = reasons.get(variant_id)
        out.append((f"{spec.label} — unavailable: {why}" if why else spec.label, variant_id))
    return out


def lesson_markdown(
    variant: str, device: str, dtype: str, causal: bool = True, mode: str = "forward"
) -> str:
    """The chosen variant's one-line lesson, and the reason when it cannot run here. Where the
    lesson is about the mask (the naive variants), full attention says what changes without it;
    a mode with a backward adds what the backward teaches."""
    spec = variant_spec(variant)
    if spec is None:
        return "Pick a variant to see what its trace teaches."
    told = spec.lesson
    lesson = f"On a GPU: {told}" if device != "cuda" else told[:1].upper() + told[1:]
    text = f"**{spec.label}** · `{spec.id}`\n\n{lesson}."
    if spec.lesson_without_mask and not causal:
        text += f"\n\n{spec.lesson_without_mask}."
    if mode != "forward" and spec.backward_lesson:
        text += f"\n\n**Backward:** {spec.backward_lesson}."
    why = unavailable_reasons(device, dtype, mode).get(variant)
    if why:
        text += f"\n\n**Unavailable here:** {why}."
    return text


ZERO_GPU_CHECKS = (
    "torch's own checks of each SDPA backend need this GPU, which ZeroGPU lends to runs only: "
    "a run shows them (summary: *SDPA's checks*, *SDPA picks*)."
)


def sdpa_checks_markdown(account: dict[str, Any] | None, device: str) -> str:
    """The picker's account of an SDPA variant at the shape on screen: torch's checks of each
    backend and its pick (empty for any other variant)."""
    if account is None:
        return ""
    if "refused" in account:
        return f"**SDPA at this shape:** {account['refused'].rstrip('.')}."
    if "failed" in account:
        return f"torch's checks could not be asked: {account['failed']}"
    rows = dict(sdpa_account_rows(account, device))
    where = "this GPU" if device == "cuda" else "this CPU"
    checks, picks = rows.get("SDPA's checks", ""), rows.get("SDPA picks", "").rstrip(".")
    return f"**torch's own checks at this shape, on {where}:** {checks}. **Picks:** {picks}."


def banner_markdown(device: str) -> str:
    """The CPU-run warning (empty on a GPU)."""
    if device == "cuda":
        return ""
    return (
        "**CPU run** — this machine has no GPU, so the profile holds CPU operators only: "
        "**GPU kernels, memcpy/memset and the kernel table will not appear**, and the shape "
        "defaults to a small one that profiles in about a second. On the Space's GPU the "
        "defaults are the post's shape (B8 H16 S1024 D64 bfloat16)."
    )


# -- summary strip ----------------------------------------------------------------------------
STRIP: tuple[tuple[str, str], ...] = (  # (label on the card, key in summary_rows)
    ("kernels / forward", "kernels / forward"),
    ("GPU µs / forward", "GPU µs / forward"),
    ("CPU µs / forward", "CPU µs / forward"),
    ("peak memory", "peak memory"),
    ("TFLOP/s", "TFLOP/s"),
    ("rel. error vs float64", "rel. error vs float64"),
    ("ran", "ran"),
    ("device", "device"),
)
EXTRA = ("shape", "bound", "roofline", "memory traffic", "dominant kernel",
         "memcpy / memset per forward")  # fmt: skip
LONG_VALUE = 10  # characters: a longer card value (torch.compile, a GPU's name) is set smaller


def _split_note(text: str) -> tuple[str, str]:
    """`0.54 (CPU time of …)` → (`0.54`, `CPU time of …`)."""
    if text.endswith(")") and " (" in text:
        value, note = text.split(" (", 1)
        return value, note[:-1]
    return text, ""


def summary_cards(summary: Summary) -> list[tuple[str, str, str]]:
    """(label, value, note) for the strip, from summary_rows so CLI and page agree."""
    rows = dict(summary_rows(summary))
    per = unit(summary)
    cards = []
    for label, key in STRIP:
        label, key = label.replace("forward", per), key.replace("forward", per)
        value, note = _split_note(rows.get(key, "n/a"))
        if key == "device":
            value, _, rest = value.rpartition(" · ")
            value, note = (value, rest) if value else (rest, "")
        cards.append((label, value, note))
    return cards


def _value_class(value: str) -> str:
    return "ap-value ap-long" if len(str(value)) > LONG_VALUE else "ap-value"


def _card_html(label: str, value: str, note: str) -> str:
    """One card: the label, the value and the note's first clause (all of it on hover)."""
    hover = f"{label}: {value}" + (f" — {note}" if note else "")
    shown_note = f'<div class="ap-note">{escaped(note.split(";")[0])}</div>' if note else ""
    return (
        f'<div class="ap-card" title="{escaped(hover)}">'
        f'<div class="ap-label">{escaped(label)}</div>'
        f'<div class="{_value_class(value)}">{escaped(value)}</div>{shown_note}</div>'
    )


def summary_html(summary: Summary) -> str:
    """The strip as HTML; every piece of text is escaped."""
    cards = "".join(_card_html(*card) for card in summary_cards(summary))
    rows = dict(summary_rows(summary))
    per = unit(summary)
    names = [key.replace("forward", per) for key in EXTRA]
    extra = " · ".join(f"<b>{escaped(k)}</b> {escaped(rows[k])}" for k in names if k in rows)
    training = "".join(
        f'<div class="ap-extra"><b>{escaped(k)}</b> {escaped(v)}</div>'
        for k, v in training_rows(summary)
    )
    notes = "".join(f'<div class="ap-extra">note: {escaped(n)}</div>' for n in summary.notes)
    return (
        f'<div class="ap-strip">{cards}</div><div class="ap-extra">{extra}</div>{training}{notes}'
    )


def placeholder_html() -> str:
    """The strip before a run; it also says why the download buttons under it are disabled."""
    return (
        '<div class="ap-strip ap-empty">Pick a variant and a shape, then click '
        "<b>Profile</b>: the figures per forward appear here, and the trace files to "
        "download below.</div>"
    )


def failed_html() -> str:
    """The strip after a failed run: the earlier results are cleared, not left beside an error."""
    return (
        '<div class="ap-strip ap-empty">The last run failed: its message says why. Earlier '
        "results and files were cleared so they cannot be read as this run's.</div>"
    )


# -- the summary for API callers ---------------------------------------------------------------
LAUNCH_FIGURES = (
    "scope", "has_gpu", "busy_pct", "idle_pct", "window_us", "busy_us", "idle_us", "gaps",
    "largest_gap_us", "launches", "cpu_launch_mean_us", "cpu_launch_us_per_forward",
    "launch_delay_mean_us", "launch_to_start_mean_us",
    # issue 31: what the per-window figure is per, the launch calls behind the GPU items (a
    # graph launch once), and the GPU work no launch in the trace points to
    "unit", "launch_calls", "unlinked", "unlinked_us",
)  # fmt: skip


def summary_json(summary: Summary) -> dict[str, Any]:
    """The summary for API callers: the dataclass with NaN/inf turned into null."""
    return finite(summary.as_dict())


def launch_json(stats: LaunchStats) -> dict[str, Any]:
    """The launch/idle headline figures for API callers (null where there is no GPU work)."""
    return finite({k: getattr(stats, k) for k in LAUNCH_FIGURES})


# -- the operator table (torch.profiler's key_averages) ----------------------------------------
def operator_headers(device: str) -> list[str]:
    return [OPERATOR_COLUMNS[c] for c in operator_columns(device)]


def operator_datatypes(device: str) -> list[str]:
    return ["str" if c == "operator" else "number" for c in operator_columns(device)]


def operator_widths(device: str) -> list[str]:
    """Name column wide, numbers evenly: key_averages lists long kernel names too."""
    numbers = len(operator_columns(device)) - 1
    return ["40%"] + [f"{60 / numbers:.1f}%"] * numbers


def operator_layout(device: str) -> Columns:
    return Columns(operator_headers(device), operator_datatypes(device), operator_widths(device))


def kernel_note(summary: Summary) -> str:
    if summary.device != "cuda":
        return "No GPU kernels: this was a CPU run. On a GPU this table lists every kernel."
    per = unit(summary)
    phases = (
        " Each phase's kernels are listed apart (column phase)." if len(summary.phases) > 1 else ""
    )
    return (
        f"Per {per} (averaged over {summary.forwards} {per}s).{phases} "
        "Est. occupancy % is CUPTI's estimate, empty where it made none (the note says why). "
        "Click a cell to read a long name in full."
    )


def phase_kernels(result: Any) -> pd.DataFrame:
    """The kernel table; for a run of more than one phase, each phase's kernels in turn, the
    phase named in a last column (a kernel both phases run is listed in each)."""
    phases = result.trace.phases
    if len(phases) < 2:
        return kernel_view(result.kernels)
    tables = [kernel_view(phase.kernels).assign(phase=name) for name, phase in phases.items()]
    return pd.concat(tables, ignore_index=True)


# -- the whole tab -------------------------------------------------------------------------------
def run_title(summary: Summary) -> str:
    config = summary.config
    mask = "causal" if config["causal"] else "full"
    heads = f"H{config['heads']}" + (f"/KV{config['kv_heads']}" if config.get("kv_heads") else "")
    queries = f" Q{config['q_len']}" if config.get("q_len") else ""
    shape = f"B{config['batch']} {heads}{queries} S{config['seq_len']} D{config['head_dim']}"
    return (
        f"{summary.variant} · {shape} {config['dtype']} {mask} · {summary.ran} · {summary.device}"
    )


def run_figure(result: Any, title: str) -> FigureSpec:
    """A run's Gantt, from the trace the run read (profiling.run.trace: no second read)."""
    return result.trace.gantt(title)


@dataclass
class Page:
    """Everything the Profile event shows, in the order of its outputs."""

    strip: str  # the summary strip and, under it, the GPU idle & launch block
    summary: dict[str, Any]  # summary_json plus "launch": launch_json
    operators: pd.DataFrame
    kernels: pd.DataFrame
    kernel_note: str
    figure: FigureSpec  # gr.Plot serialises it with .to_json()
    files: dict[str, Path] = field(default_factory=dict)  # json, gz, txt (memory, run: or None)
    roles: pd.DataFrame = field(default_factory=pd.DataFrame)  # µs per step by role
    roofline_figure: FigureSpec | None = None  # each kernel on the device's roofline
    roofline: pd.DataFrame = field(default_factory=pd.DataFrame)  # per kernel: FLOP, bytes…
    # issue 23: the memory timeline over one step, its breakdown, and what they show
    memory_note: str = ""
    memory_figure: Any = None
    memory_table: pd.DataFrame | None = None


def page(result: Any, roofline: pd.DataFrame | None = None) -> Page:
    """ProfileResult → what the page shows. The figure is built here, outside any GPU slot.
    `roofline`: rows kept in the run store (a reopened run has no Workload to size them)."""
    summary: Summary = result.summary
    launch = result.trace.launch_stats()
    roles = result.trace.roles()
    roofline = run_roofline(result) if roofline is None else roofline
    counted = views_counters.joined(result)  # issue 36: None unless counters were asked for
    if counted is not None:
        roofline = views_counters.roofline_rows(roofline, counted)
    why = {"roles": as_records(roles), "roofline": as_records(roofline)}
    counters = {"counters": views_counters.counters_json(counted)} if counted else {}
    return Page(
        strip=summary_html(summary)
        + launch_html(launch)
        + timing_html(summary)
        + (views_counters.counters_html(counted) if counted else ""),
        summary={
            **summary_json(summary),
            "launch": launch_json(launch),
            **finite(why),
            "memory_timeline": timeline_json(result.memory_timeline),
            **counters,
        },
        operators=operator_view(result.operators, summary.device),
        kernels=views_counters.kernel_table(result, counted) if counted else phase_kernels(result),
        kernel_note=kernel_note(summary),
        figure=run_figure(result, run_title(summary)),
        files={
            "json": result.trace_json,
            "gz": result.trace_gz,
            "txt": result.table_txt,
            "memory": result.memory_snapshot,
            "run": result.run_json,
        },
        memory_note=memory_note(summary),
        memory_figure=memory_figure(result.memory_timeline, "Memory in use over one step"),
        memory_table=memory_table(summary),
        roles=role_view(roles),
        roofline_figure=roofline_spec(
            roofline, summary.device_name, summary.config["dtype"], own_run=True
        ),
        roofline=views_counters.roofline_table(roofline_view(roofline), roofline)
        if counted
        else roofline_view(roofline),
    )


def why_text(result: Any) -> str:
    """The CLI's text of a run's roles and per-kernel roofline (empty without GPU kernels)."""
    roles = result.trace.roles()
    if roles.empty:
        return ""
    roofline = roofline_view(run_roofline(result)).drop(columns=["Full name", "Compute roof"])
    return (
        f"Kernels by role (µs per {unit(result.summary)}):\n"
        f"{text_table(role_view(roles))}\n\nRoofline per kernel:\n{text_table(roofline, 36)}\n"
    )
