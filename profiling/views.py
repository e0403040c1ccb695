"""What the page shows, computed from a ProfileResult: summary strip, display tables, banner.

Pure functions (no gradio) so the page, the API and the tests see the same numbers, and
app.py stays a thin wiring of components. The limits on uploads, the queue and temp files
live here; what a request may ask (ranges, budgets) in profiling.workload and job_request.
"""

from __future__ import annotations

import html
import math
import shutil
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attention import VARIANTS
from profiling import files
from profiling.gantt import FigureSpec
from profiling.launch import LaunchStats, launch_rows
from profiling.summary import Summary, summary_rows
from profiling.workload import unavailable_reasons

# -- limits (README's "Limits" section quotes these) ---------------------------------------
MAX_FILE_SIZE = "25mb"  # launch(max_file_size=...): bounds /gradio_api/upload
# Uploaded traces (Analyse, Diff) are checked again before parsing, with the same size (Gradio
# counts "25mb" as 25 MiB) and a bound on the JSON once gunzipped, which stops a gzip bomb.
TRACE_MAX_UPLOAD_BYTES = 25 * 1024**2
TRACE_MAX_EXPANDED_BYTES = 256 * 1024**2
QUEUE_MAX_SIZE = 16  # demo.queue(max_size=...): requests waiting for the one GPU slot
DELETE_CACHE = (1800, 3600)  # gr.Blocks(delete_cache=(every s, older than s)): served copies
KEEP_RUN_DIRS = 8  # our own temp dirs (one per run) kept before the oldest is deleted
# ... and any of our temp dirs older than the cache age goes too (a previous process's as well):
# checked when the app starts and, at most every STALE_SWEEP_S, when a run adds a folder.
STALE_SWEEP_S = 60
GPU_GROUP = "gpu"  # concurrency_id shared by every listener that uses the GPU

# The post's shape on a GPU; on a CPU a small shape that profiles in well under a second.
DEFAULTS: dict[str, dict[str, Any]] = {
    "cuda": dict(variant="naive", seq_len=1024, dtype="bfloat16", batch=8, heads=16,
                 head_dim=64, causal=True),
    "cpu": dict(variant="naive", seq_len=256, dtype="float32", batch=1, heads=4,
                head_dim=64, causal=True),
}  # fmt: skip
GENERIC_ERROR = (
    "Something unexpected went wrong while profiling; it has been logged. "
    "Try again, or pick another variant or a smaller shape."
)


def defaults(device: str) -> dict[str, Any]:
    return dict(DEFAULTS["cuda" if device == "cuda" else "cpu"])


def variant_choices(device: str, dtype: str) -> list[tuple[str, str]]:
    """(label, id) pairs for the dropdown; unavailable variants say so and why."""
    reasons = unavailable_reasons(device, dtype)
    out = []
    for vid, v in VARIANTS.items():
        why = reasons.get(vid)
        out.append((f"{v.label} — unavailable: {why}" if why else v.label, vid))
    return out


def lesson_markdown(variant: str, device: str, dtype: str, causal: bool = True) -> str:
    """The chosen variant's one-line lesson, and the reason when it cannot run here. Where the
    lesson is about the mask (the naive variants), full attention says what changes without it."""
    v = VARIANTS.get(variant)
    if v is None:
        return "Pick a variant to see what its trace teaches."
    lesson = f"On a GPU: {v.lesson}" if device != "cuda" else v.lesson[:1].upper() + v.lesson[1:]
    text = f"**{v.label}** · `{v.id}`\n\n{lesson}."
    if v.lesson_without_mask and not causal:
        text += f"\n\n{v.lesson_without_mask}."
    why = unavailable_reasons(device, dtype).get(variant)
    if why:
        text += f"\n\n⛔ **Unavailable here:** {why}."
    return text


def banner_markdown(device: str) -> str:
    """The CPU-run warning (empty on a GPU)."""
    if device == "cuda":
        return ""
    return (
        "⚠️ **CPU run** — this machine has no GPU, so the profile holds CPU operators only: "
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
EXTRA = ("shape", "bound", "dominant kernel", "memcpy / memset per forward")


def _split_note(text: str) -> tuple[str, str]:
    """`0.54 (CPU time of …)` → (`0.54`, `CPU time of …`)."""
    if text.endswith(")") and " (" in text:
        value, note = text.split(" (", 1)
        return value, note[:-1]
    return text, ""


def summary_cards(summary: Summary) -> list[tuple[str, str, str]]:
    """(label, value, note) for the strip, from summary_rows so CLI and page agree."""
    rows = dict(summary_rows(summary))
    cards = []
    for label, key in STRIP:
        value, note = _split_note(rows.get(key, "n/a"))
        if key == "device":
            value, _, rest = value.rpartition(" · ")
            value, note = (value, rest) if value else (rest, "")
        cards.append((label, value, note))
    return cards


LONG_VALUE = 10  # characters: a longer card value (torch.compile, a GPU's name) is set smaller


def _value_class(value: str) -> str:
    return "ap-value ap-long" if len(str(value)) > LONG_VALUE else "ap-value"


def summary_html(summary: Summary) -> str:
    """The strip as HTML; every piece of text is escaped."""
    e = lambda t: html.escape(str(t), quote=True)  # noqa: E731
    cards = "".join(
        f'<div class="ap-card" title="{e(label)}: {e(value)}{e(" — " + note if note else "")}">'
        f'<div class="ap-label">{e(label)}</div>'
        f'<div class="{_value_class(value)}">{e(value)}</div>'
        + (f'<div class="ap-note">{e(note.split(";")[0])}</div>' if note else "")
        + "</div>"
        for label, value, note in summary_cards(summary)
    )
    rows = dict(summary_rows(summary))
    extra = " · ".join(f"<b>{e(k)}</b> {e(rows[k])}" for k in EXTRA if k in rows)
    notes = "".join(f'<div class="ap-extra">note: {e(n)}</div>' for n in summary.notes)
    return f'<div class="ap-strip">{cards}</div><div class="ap-extra">{extra}</div>{notes}'


# -- GPU idle & launch overhead ----------------------------------------------------------------
LAUNCH_TITLE = "GPU idle & launch overhead"
NO_GPU_WORK = "no GPU work: a CPU-only run or trace has no GPU busy time, idle gaps or launches"
LAUNCH_KERNEL_ROWS = 12  # per-kernel launch rows shown under the headline figures


def launch_html(stats: LaunchStats) -> str:
    """The launch/idle block (HTA's definitions): headline rows, then launch figures per kernel.

    This is where "cuDNN moved the cost to the CPU" shows as a number.
    """
    e = lambda t: html.escape(str(t), quote=True)  # noqa: E731
    title = f'<div class="ap-launch-title">{e(LAUNCH_TITLE)}</div>'
    if not stats.has_gpu:
        return f'<div class="ap-launch">{title}<div class="ap-note">{e(NO_GPU_WORK)}</div></div>'
    rows = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in launch_rows(stats))
    table = ""
    per = stats.per_kernel.head(LAUNCH_KERNEL_ROWS)
    if not per.empty:
        head = ("kernel", "launch API", "launches", "CPU launch µs (mean)",
                "launch delay µs (mean)", "launch → start µs (mean)", "GPU µs (mean)")  # fmt: skip
        cols = ("name", "kernel", "launch_api", "count", "cpu_launch_mean_us",
                "launch_delay_mean_us", "launch_to_start_mean_us", "gpu_mean_us")  # fmt: skip
        body = "".join(
            f"<tr><td title='{e(name)}'>{e(_clip(kernel, 60))}</td><td>{e(api)}</td>"
            f"<td>{count:,}</td><td>{cpu:,.1f}</td><td>{delay:,.1f}</td><td>{to_start:,.1f}</td>"
            f"<td>{gpu:,.1f}</td></tr>"
            for name, kernel, api, count, cpu, delay, to_start, gpu in zip(
                *(per[c].tolist() for c in cols), strict=True
            )
        )
        cells = "".join(f"<th>{e(h)}</th>" for h in head)
        table = f'<table class="ap-launch-table"><tr>{cells}</tr>{body}</table>'
    return f'<div class="ap-launch">{title}<dl>{rows}</dl>{table}</div>'


def launch_json(stats: LaunchStats) -> dict[str, Any]:
    """The launch/idle headline figures for API callers (null where there is no GPU work)."""
    keys = (
        "scope", "has_gpu", "busy_pct", "idle_pct", "window_us", "busy_us", "idle_us", "gaps",
        "largest_gap_us", "launches", "cpu_launch_mean_us", "cpu_launch_us_per_forward",
        "launch_delay_mean_us", "launch_to_start_mean_us",
    )  # fmt: skip
    return _finite({k: getattr(stats, k) for k in keys})


def _clip(text: Any, width: int) -> str:
    text = str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def placeholder_html() -> str:
    return (
        '<div class="ap-strip ap-empty">Pick a variant and a shape, then click '
        "<b>Profile</b>: the figures per forward appear here.</div>"
    )


def failed_html() -> str:
    """The strip after a failed run: the earlier results are cleared, not left beside an error."""
    return (
        '<div class="ap-strip ap-empty">The last run failed: its message says why. Earlier '
        "results were cleared so they cannot be read as this run's.</div>"
    )


def summary_json(summary: Summary) -> dict[str, Any]:
    """The summary for API callers: the dataclass with NaN/inf turned into null."""
    return _finite(summary.as_dict())


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


# -- tables ------------------------------------------------------------------------------------
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
KERNEL_COLUMNS = {  # the decoding right after the name: reading names is the lesson
    "kernel": "Kernel",
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
    "name": "Full name",
}
KERNEL_TEXT = ("kernel", "category", "grid", "block", "decoded", "name")
DIGITS = 1  # µs shown to 0.1 µs; counts per forward to 0.01


def operator_columns(device: str) -> list[str]:
    """The operator table's source columns: GPU columns only where a GPU runs (fixed per page)."""
    return [c for c in OPERATOR_COLUMNS if device == "cuda" or not c.startswith("device_")]


def operator_headers(device: str) -> list[str]:
    return [OPERATOR_COLUMNS[c] for c in operator_columns(device)]


def operator_datatypes(device: str) -> list[str]:
    return ["str" if c == "operator" else "number" for c in operator_columns(device)]


def operator_widths(device: str) -> list[str]:
    """Name column wide, numbers evenly: key_averages lists long kernel names too."""
    numbers = len(operator_columns(device)) - 1
    return ["40%"] + [f"{60 / numbers:.1f}%"] * numbers


def kernel_widths() -> list[int]:
    """Pixels: name, category, decoding and the per-forward time fit without scrolling."""
    wide = {"kernel": 280, "category": 110, "decoded": 330, "name": 480}
    return [wide.get(c, 90) for c in KERNEL_COLUMNS]


def kernel_headers() -> list[str]:
    return list(KERNEL_COLUMNS.values())


def kernel_datatypes() -> list[str]:
    return ["str" if c in KERNEL_TEXT else "number" for c in KERNEL_COLUMNS]


def operator_view(operators: pd.DataFrame, device: str) -> pd.DataFrame:
    """key_averages with readable headers, rounded; GPU columns only when a GPU ran."""
    columns = operator_columns(device)
    digits = {c: DIGITS for c in columns if c.endswith("_us")}
    return readable(operators, {c: OPERATOR_COLUMNS[c] for c in columns}, digits)


_ROUND = {"total_us": DIGITS, "mean_us": DIGITS, "min_us": DIGITS, "max_us": DIGITS,
          "pct_gpu": DIGITS, "count": 2, "registers_per_thread": None, "shared_memory": None,
          "occupancy_pct": None}  # fmt: skip


def kernel_view(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernel table with its decoding, readable headers, rounded numbers.

    CUPTI's occupancy estimate reads 0 where it has none (nvjet, cuDNN and Triton kernels on
    Hopper among them): a kernel that ran never had zero occupancy, so that cell is left empty.
    """
    view = readable(kernels, KERNEL_COLUMNS, _ROUND)
    occupancy = KERNEL_COLUMNS["occupancy_pct"]
    view[occupancy] = view[occupancy].astype(float).mask(view[occupancy] == 0)
    return view


def readable(
    table: pd.DataFrame, headers: dict[str, str], digits: dict[str, int | None]
) -> pd.DataFrame:
    """`table`'s columns under readable `headers`, the numeric ones (`digits`) rounded; a
    missing column reads empty.

    Built column by column into one frame: the reindex/round/rename chain it replaces cost
    ~2 ms a run for a table of a few rows."""
    n = len(table)
    out = {}
    for c, header in headers.items():
        if c not in table:
            out[header] = np.full(n, np.nan if c in digits else None)
        elif c in digits:
            out[header] = _numbers(table[c], digits[c])
        else:
            out[header] = table[c].to_numpy()
    return pd.DataFrame(out)


def _numbers(column: pd.Series, digits: int | None) -> np.ndarray:
    """A numeric column as floats (anything unreadable: NaN), rounded to `digits`; unrounded
    columns keep pandas' numeric type (integer register counts stay integers)."""
    if digits is None:
        return pd.to_numeric(column, errors="coerce").to_numpy()
    try:
        values = column.to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):
        values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.round(values, digits)


def kernel_note(summary: Summary) -> str:
    if summary.device != "cuda":
        return "No GPU kernels: this was a CPU run. On a GPU this table lists every kernel."
    return (
        f"Per forward (averaged over {summary.forwards} forwards). "
        "Est. occupancy % is CUPTI's estimate, empty where the trace gives 0 (no estimate). "
        "Click a cell to read a long name in full."
    )


def datatypes(table: pd.DataFrame) -> list[str]:
    """Gradio Dataframe datatype per column: numbers sort as numbers."""
    return ["number" if pd.api.types.is_numeric_dtype(table[c]) else "str" for c in table.columns]


# -- the whole page ----------------------------------------------------------------------------
def run_title(summary: Summary) -> str:
    c = summary.config
    mask = "causal" if c["causal"] else "full"
    return (
        f"{summary.variant} · B{c['batch']} H{c['heads']} S{c['seq_len']} D{c['head_dim']} "
        f"{c['dtype']} {mask} · {summary.ran} · {summary.device}"
    )


def run_figure(result: Any, title: str) -> FigureSpec:
    """A run's Gantt, from the trace the run read (profiling.run_trace: no second read)."""
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
    files: dict[str, Path] = field(default_factory=dict)  # json, gz, txt


def page(result: Any) -> Page:
    """ProfileResult → what the page shows. The figure is built here, outside any GPU slot."""
    s: Summary = result.summary
    launch = result.trace.launch_stats()
    return Page(
        strip=summary_html(s) + launch_html(launch),
        summary={**summary_json(s), "launch": launch_json(launch)},
        operators=operator_view(result.operators, s.device),
        kernels=kernel_view(result.kernels),
        kernel_note=kernel_note(s),
        figure=run_figure(result, run_title(s)),
        files={"json": result.trace_json, "gz": result.trace_gz, "txt": result.table_txt},
    )


STALE = files.StaleSweeper(DELETE_CACHE[1], STALE_SWEEP_S)  # one per process


class RunDirs:
    """Deletes the runner's temp dirs beyond the newest `keep` (Gradio serves its own copies),
    and lets `sweeper` delete any of the app's temp dirs older than the cache age.

    Only directories the app made (`attnprof-*` directly in the temp dir, see profiling.files)
    are ever removed.
    """

    def __init__(
        self, keep: int = KEEP_RUN_DIRS, sweeper: files.StaleSweeper | None = STALE
    ) -> None:
        self.keep = keep
        self.sweeper = sweeper
        self._dirs: deque[Path] = deque()
        self._lock = threading.Lock()

    def add(self, path: Path) -> None:
        path = Path(path)
        if not (path.name.startswith("attnprof-") and path.parent == Path(tempfile.gettempdir())):
            return
        with self._lock:
            if path not in self._dirs:
                self._dirs.append(path)
            while len(self._dirs) > self.keep:
                shutil.rmtree(self._dirs.popleft(), ignore_errors=True)
        if self.sweeper is not None:
            self.sweeper.maybe_sweep()

    def __len__(self) -> int:
        return len(self._dirs)
