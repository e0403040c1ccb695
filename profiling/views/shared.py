"""What several tabs show alike, and the page's limits.

Pure functions (no gradio), so the page, the API and the tests see the same numbers: the limits
(README's "Limits" section quotes them), the folders the app keeps, the helpers that turn a
backend table into a shown one, and the kernel table and GPU idle & launch block that Profile
and Analyse both show. Each tab's own view is in views_profile, views_compare, views_diff,
views_sweep and views_analyze.
"""

from __future__ import annotations

import html
import math
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from profiling import files
from profiling.analysis.columns import (
    KERNEL_COLUMNS,
    OPERATOR_COLUMNS,
    ROOFLINE_COLUMNS,
    kernel_columns,
    role_columns,
)
from profiling.analysis.launch import LaunchStats, launch_rows
from profiling.kernels.roles import FLUSH, PLAIN_ROLES, ROLES

# -- limits (README's "Limits" section quotes these) ---------------------------------------
MAX_FILE_SIZE = "200mb"  # launch(max_file_size=...): bounds /gradio_api/upload
# Uploaded traces (Analyse, Diff) are checked again before parsing, with the same size (Gradio
# counts "200mb" as 200 MiB) and a bound on the JSON once gunzipped, which stops a gzip bomb.
# Read as a stream (profiling.trace.read), 3 GiB of JSON is ~1.5·10⁷ events: ~4 GB of memory
# at most (docs/performance.md), two analyses at a time.
TRACE_MAX_UPLOAD_BYTES = 200 * 1024**2
TRACE_MAX_EXPANDED_BYTES = 3 * 1024**3
QUEUE_MAX_SIZE = 16  # demo.queue(max_size=...): requests waiting for the one GPU slot
DELETE_CACHE = (1800, 3600)  # gr.Blocks(delete_cache=(every s, older than s)): served copies
KEEP_RUN_DIRS = 8  # our own temp dirs (one per run) kept before the oldest is deleted
# ... and any of our temp dirs older than the cache age goes too (a previous process's as well):
# checked when the app starts and, at most every STALE_SWEEP_S, when a run adds a folder.
STALE_SWEEP_S = 60
GPU_GROUP = "gpu"  # concurrency_id shared by every listener that uses the GPU
TRACE_GROUP = "traces"  # concurrency_id of Diff and Analyse: CPU work, apart from the GPU jobs
# Parses at a time: a big upload holds neither the GPU queue nor a small upload (each is read in
# a worker process; their memory together is bounded: profiling.views.upload_worker)
TRACE_CONCURRENCY = 4

# The post's shape on a GPU; on a CPU a small shape that profiles in well under a second.
DEFAULTS: dict[str, dict[str, Any]] = {
    "cuda": dict(variant="naive", seq_len=1024, dtype="bfloat16", batch=8, heads=16,
                 head_dim=64, causal=True, steps=3),
    "cpu": dict(variant="naive", seq_len=256, dtype="float32", batch=1, heads=4,
                head_dim=64, causal=True, steps=3),
}  # fmt: skip
# The inference-shape presets (issue 21): name → the fields they set (the others as they are).
# The CPU's are the same kinds of shapes made small enough for its budget.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "cuda": {
        "the post's shape": dict(batch=8, heads=16, seq_len=1024, head_dim=64, kv_heads=None,
                                 q_len=None, window=None),
        "LLM prefill: B4 H32/KV8 S4096 D128": dict(batch=4, heads=32, kv_heads=8, seq_len=4096,
                                                   head_dim=128, q_len=None, window=None),
        "LLM decode: B16 H32/KV8, 1 token vs a 8192 cache, D128": dict(
            batch=16, heads=32, kv_heads=8, seq_len=8192, q_len=1, head_dim=128, window=None),
        "sliding window 1024 (B4 H32/KV8 S4096 D128)": dict(
            batch=4, heads=32, kv_heads=8, seq_len=4096, head_dim=128, q_len=None, window=1024),
    },
    "cpu": {
        "the CPU's default shape": dict(batch=1, heads=4, seq_len=256, head_dim=64,
                                        kv_heads=None, q_len=None, window=None),
        "prefill, grouped heads: B1 H8/KV2 S1024 D64": dict(batch=1, heads=8, kv_heads=2,
                                                             seq_len=1024, head_dim=64,
                                                             q_len=None, window=None),
        "decode: B4 H8/KV2, 1 token vs a 2048 cache, D64": dict(
            batch=4, heads=8, kv_heads=2, seq_len=2048, q_len=1, head_dim=64, window=None),
        "sliding window 256 (B1 H8/KV2 S1024 D64)": dict(
            batch=1, heads=8, kv_heads=2, seq_len=1024, head_dim=64, q_len=None, window=256),
    },
}  # fmt: skip
GENERIC_ERROR = (
    "Something unexpected went wrong while profiling; it has been logged. "
    "Try again, or pick another variant or a smaller shape."
)


def generic_error(doing: str = "profiling") -> str:
    """The message of an unexpected error, in the words of what was being done ("opening the
    run", "listing the stored runs"): History and the uploads are not profiles."""
    if doing == "profiling":
        return GENERIC_ERROR
    return f"Something unexpected went wrong while {doing}; it has been logged. Try again."


def before_run_note(button: str, results: str) -> str:
    """A tab's line before its first run: why its results are empty and its download disabled."""
    return (
        f"Nothing run yet: click **{button}** and {results} appear here; the download button "
        "is enabled once there is a file behind it."
    )


def failed_note(what: str) -> str:
    """A tab's line after a failed run, whose outputs were emptied."""
    return (
        f"**The last {what} failed**: its message says why. Earlier results and files were "
        "cleared so they cannot be read as this one's."
    )


def defaults(device: str) -> dict[str, Any]:
    """The page's starting values on `device`."""
    return dict(DEFAULTS["cuda" if device == "cuda" else "cpu"])


# -- text and numbers as shown ---------------------------------------------------------------
def escaped(text: Any) -> str:
    """Text for HTML, quotes included: names from a trace are untrusted."""
    return html.escape(str(text), quote=True)


def clip(text: Any, width: int) -> str:
    """`text` cut to `width` characters, an ellipsis marking the cut."""
    text = str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def significant(value: float, digits: int) -> float:
    """`value` to `digits` significant digits (a missing or infinite one as it is)."""
    return float(f"{value:.{digits}g}") if value is not None and math.isfinite(value) else value


def without_nan(table: pd.DataFrame) -> pd.DataFrame:
    """Gaps as None: a NaN cell reaches API callers as a bare `NaN`, which is not JSON."""
    out = table.astype(object)
    return out.where(table.notna(), None)


def datatypes(table: pd.DataFrame) -> list[str]:
    """Gradio Dataframe datatype per column: numbers sort as numbers."""
    return ["number" if pd.api.types.is_numeric_dtype(table[c]) else "str" for c in table.columns]


DIGITS = 1  # µs shown to 0.1 µs; counts per forward to 0.01


def readable(
    table: pd.DataFrame, headers: dict[str, str], digits: dict[str, int | None]
) -> pd.DataFrame:
    """`table`'s columns under readable `headers`, the numeric ones (`digits`) rounded; a
    missing column reads empty. Built column by column into one frame (docs/performance.md)."""
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


# -- the kernel table (Profile, Analyse) -------------------------------------------------------
KERNEL_TEXT = ("kernel", "role", "category", "grid", "block", "decoded", "occupancy_note", "name")
KERNEL_DIGITS = {"total_us": DIGITS, "mean_us": DIGITS, "min_us": DIGITS, "max_us": DIGITS,
                 "pct_gpu": DIGITS, "count": 2, "registers_per_thread": None,
                 "shared_memory": None, "occupancy_pct": None}  # fmt: skip


def kernel_widths() -> list[int]:
    """Pixels: name, category, decoding and the per-forward time fit without scrolling."""
    wide = {
        "kernel": 280,
        "role": 130,
        "category": 110,
        "decoded": 330,
        "occupancy_note": 200,
        "name": 480,
    }
    return [wide.get(c, 90) for c in KERNEL_COLUMNS]


def kernel_headers() -> list[str]:
    return list(KERNEL_COLUMNS.values())


def kernel_datatypes() -> list[str]:
    return ["str" if c in KERNEL_TEXT else "number" for c in KERNEL_COLUMNS]


class Columns(NamedTuple):
    """A page table's layout, fixed when the page is built: its headers, each column's
    datatype ("str" or "number") and widths (pixels, or shares of the page)."""

    headers: list[str]
    datatype: list[str]
    column_widths: list[Any]


# A header's words in the tables' monospace font (measured in Chromium: "occupancy", 9
# characters, is 76 px) and the cell's padding around them, with a pixel or two to spare.
HEADER_CHAR_PX, HEADER_PADDING_PX = 8.5, 20


def header_width(header: str) -> int:
    """Pixels a column needs so that its header's longest word fits on one line."""
    longest = max((len(word) for word in str(header).split()), default=0)
    return math.ceil(longest * HEADER_CHAR_PX + HEADER_PADDING_PX)


def fit_header_widths(headers: Sequence[Any], widths: Sequence[Any]) -> list[Any]:
    """`widths` with each pixel width raised to its header's longest word (header_width): a
    narrower column broke "occupancy" inside the word (issue 42). Shares of the page ("12%")
    and "auto" stay as they are."""
    return [
        max(width, header_width(header)) if isinstance(width, int | float) else width
        for header, width in zip(headers, widths, strict=False)
    ] + list(widths[len(headers) :])


def kernel_layout() -> Columns:
    return Columns(kernel_headers(), kernel_datatypes(), kernel_widths())


def kernel_view(kernels: pd.DataFrame, unit: str = "forward") -> pd.DataFrame:
    """The kernel table with its decoding, readable headers (per `unit`, see
    columns.PER_HEADER), rounded numbers. An occupancy CUPTI could not estimate is empty, with
    the reason beside it (kernels.kernel_frame)."""
    return readable(kernels, kernel_columns(unit), KERNEL_DIGITS)


# -- GPU idle & launch overhead (Profile, Analyse) ---------------------------------------------
LAUNCH_TITLE = "GPU idle & launch overhead"
NO_GPU_WORK = "no GPU work: a CPU-only run or trace has no GPU busy time, idle gaps or launches"
SHARED_LAUNCH = (
    "One {} call starts several GPU items (a CUDA graph's replay): each of their rows shows "
    "that call's CPU time, counted once in the CPU launch figures above."
)
LAUNCH_KERNEL_ROWS = 12  # per-kernel launch rows shown under the headline figures
# (header, column of LaunchStats.per_kernel) per cell of a kernel's row
LAUNCH_CELLS = (
    ("kernel", "kernel"),
    ("launch API", "launch_api"),
    ("launches", "count"),
    ("CPU launch µs (mean)", "cpu_launch_mean_us"),
    ("launch delay µs (mean)", "launch_delay_mean_us"),
    ("launch → start µs (mean)", "launch_to_start_mean_us"),
    ("GPU µs (mean)", "gpu_mean_us"),
)


def launch_html(stats: LaunchStats) -> str:
    """The launch/idle block (HTA's definitions): headline rows, then launch figures per kernel.

    This is where "cuDNN moved the cost to the CPU" shows as a number.
    """
    title = f'<div class="ap-launch-title">{escaped(LAUNCH_TITLE)}</div>'
    if not stats.has_gpu:
        note = f'<div class="ap-note">{escaped(NO_GPU_WORK)}</div>'
        return f'<div class="ap-launch">{title}{note}</div>'
    rows = "".join(f"<dt>{escaped(k)}</dt><dd>{escaped(v)}</dd>" for k, v in launch_rows(stats))
    per = stats.per_kernel.head(LAUNCH_KERNEL_ROWS)
    table = _launch_table(per) if not per.empty else ""
    shared = ", ".join(dict.fromkeys(name for name, _, _ in stats.multi_launches))
    if table and shared:  # the table's rows each show their call's time: say it is one call's
        note = SHARED_LAUNCH.format(shared)
        table += f'<div class="ap-note">{escaped(note)}</div>'
    return f'<div class="ap-launch">{title}<dl>{rows}</dl>{table}</div>'


def _launch_table(per: pd.DataFrame) -> str:
    """One row per kernel: its short name (the full one on hover), launch API and means."""
    heads = "".join(f"<th>{escaped(header)}</th>" for header, _ in LAUNCH_CELLS)
    body = []
    for row in per.to_dict("records"):
        kernel = f"<td title='{escaped(row['name'])}'>{escaped(clip(row['kernel'], 60))}</td>"
        api = f"<td>{escaped(row['launch_api'])}</td><td>{row['count']:,}</td>"
        means = "".join(f"<td>{row[column]:,.1f}</td>" for _, column in LAUNCH_CELLS[3:])
        body.append(f"<tr>{kernel}{api}{means}</tr>")
    return f'<table class="ap-launch-table"><tr>{heads}</tr>{"".join(body)}</table>'


# -- the folders the app keeps -----------------------------------------------------------------
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


def roofline_view(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-kernel roofline table with readable headers, rounded."""
    digits = {"mean_us": DIGITS, "flop_per_call": None, "bytes_per_call": None, "tflops": 2,
              "tbps": 3, "intensity": 2, "total_us": DIGITS, "calls": None}  # fmt: skip
    return readable(rows, ROOFLINE_COLUMNS, digits)


# roles only attention's kernels have (a fused attention kernel, QKᵀ, the mask…); a trace of
# another model's has the plain ones only (GEMM, elementwise, softmax, copy…)
ATTENTION_ROLES = frozenset(ROLES) - frozenset(PLAIN_ROLES) - {FLUSH}


def roles_title(roles: pd.DataFrame | None, title: str, unit: str = "") -> str:
    """A role table's title: `title` "in attention" only where the table holds a role only
    attention has (issue 42: a recommendation model's trace was titled "in attention")."""
    first = roles.iloc[:, 0] if isinstance(roles, pd.DataFrame) and roles.shape[1] else []
    attention = any(role in ATTENTION_ROLES for role in first)
    return f"{title}{' in attention' if attention else ''}{f' ({unit})' if unit else ''}"


def role_view(roles: pd.DataFrame, unit: str = "step") -> pd.DataFrame:
    """The role table with readable headers (per `unit`), rounded (the phase column kept)."""
    headers = {**role_columns(unit), **({"phase": "Phase"} if "phase" in roles else {})}
    return readable(roles, headers, {"us": DIGITS, "pct_gpu": 1, "calls": 2})


def operator_columns(device: str) -> list[str]:
    """The operator table's source columns: GPU columns only where a GPU runs (fixed per page)."""
    return [c for c in OPERATOR_COLUMNS if device == "cuda" or not c.startswith("device_")]


def operator_view(operators: pd.DataFrame, device: str) -> pd.DataFrame:
    """key_averages with readable headers, rounded; GPU columns only when a GPU ran."""
    columns = operator_columns(device)
    digits = {c: DIGITS for c in columns if c.endswith("_us")}
    return readable(operators, {c: OPERATOR_COLUMNS[c] for c in columns}, digits)
