"""What the Compare, Diff, Sweep and Analyse tabs show, and the checks of their uploads.

Pure functions (no gradio): app.py wires components to them and turns their ConfigError /
TraceError into gr.Error. A Compare or Sweep request is checked in profiling.job_request; the
uploads, Diff labels and the Gantt window here, because a component's own check stops only what
the page itself can send.
"""

from __future__ import annotations

import html
import logging
import math
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from attention import VARIANTS, on_zero_gpu
from profiling import views
from profiling.analyze import analyze
from profiling.compare import (
    GLANCE_COLUMNS,
    POST_VARIANTS,
    CompareResult,
    default_variants,
    peaks_table,
)
from profiling.compare_figures import (
    gpu_cpu_bars,
    mini_gantts,
    sweep_memory_figure,
    sweep_time_figure,
)
from profiling.diff import diff, labelled
from profiling.gantt import FigureSpec, gantt_spec, gantt_x_title
from profiling.launch import launch_rows
from profiling.sweep import SWEEP_COLUMNS, SweepResult, doubling
from profiling.trace import Trace, load
from profiling.trace_events import TraceError
from profiling.workload import ConfigError, device_key, show, unavailable_reasons

log = logging.getLogger(__name__)

# -- limits (README's "Limits" section quotes these) -------------------------------------------
TRACE_GROUP = "traces"  # concurrency_id of Diff and Analyse: CPU work, apart from the GPU jobs
TRACE_CONCURRENCY = 2  # parses at a time; a big upload cannot hold the GPU queue
MAX_LABEL = 32  # characters of a Diff label (shown in column headers)
SWEEP_DEFAULT_VARIANTS = ("naive", "sdpa-flash", "sdpa-cudnn")
SWEEP_DEFAULT_LENGTHS = {"cuda": doubling(256, 16384), "cpu": [256, 512, 1024]}
DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _clip(text: Any, width: int) -> str:
    text = str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


# -- choices and defaults -----------------------------------------------------------------------
def variant_choices(device: str, dtype: str) -> list[tuple[str, str]]:
    """(label, id) for the multiselects: every variant, the unavailable ones with the reason.

    Unavailable variants stay selectable so a Compare lists them with the reason.
    """
    reasons = unavailable_reasons(device, dtype)
    return [
        (f"{vid} — unavailable: {reasons[vid]}" if reasons.get(vid) else vid, vid)
        for vid in VARIANTS
    ]


def compare_defaults(device: str, dtype: str) -> list[str]:
    """The post's six plus the Hub variants that can run. When that cannot be checked: on
    ZeroGPU (CUDA emulated outside the slot, workload._reason) the six, which the job checks again
    inside; elsewhere those of the six whose own check says they can run."""
    try:
        return default_variants(device, dtype)
    except Exception:
        if on_zero_gpu():
            return list(POST_VARIANTS)
        log.warning("the default variants could not be checked", exc_info=True)
        reasons = unavailable_reasons(device, dtype)
        return [v for v in POST_VARIANTS if not reasons.get(v)]


def sweep_defaults(device: str, dtype: str) -> list[str]:
    """naive, sdpa-flash and sdpa-cudnn, those that can run here."""
    reasons = unavailable_reasons(device, dtype)
    return [v for v in SWEEP_DEFAULT_VARIANTS if not reasons.get(v)]


def sweep_default_lengths(device: str) -> list[int]:
    return list(SWEEP_DEFAULT_LENGTHS[device_key(device)])


# -- Compare ------------------------------------------------------------------------------------
# On a CPU "decoded" only ever says "CPU operator with the most self time": left out too.
GLANCE_CPU = ["variant", "status", "CPU µs/fwd", "TFLOP/s", "rel. err", "ran", "dominant kernel",
              "reason"]  # fmt: skip
GLANCE_TEXT = {"variant", "status", "bound", "ran", "dominant kernel", "decoded", "reason"}
GLANCE_WIDE = {"variant": 130, "status": 110, "ran": 150, "dominant kernel": 250,
               "decoded": 300, "reason": 380}  # fmt: skip
GLANCE_CPU_SHARES = {"variant": 11, "status": 9, "CPU µs/fwd": 8, "TFLOP/s": 8, "rel. err": 7,
                     "ran": 11, "dominant kernel": 18, "reason": 28}  # fmt: skip
_ROUND = {"kernels/fwd": 2, "GPU µs/fwd": 1, "CPU µs/fwd": 1, "peak MiB": 1, "% of peak": 1,
          "GPU busy %": 1, "launch delay µs": 1, "CPU launch µs/fwd": 1}  # fmt: skip
_SIGNIFICANT = {"TFLOP/s": 3, "rel. err": 2}


def glance_columns(device: str) -> list[str]:
    """The "at a glance" columns: all of them on a GPU; on a CPU the GPU-only ones are left out."""
    return list(GLANCE_COLUMNS) if device_key(device) == "cuda" else list(GLANCE_CPU)


def glance_datatypes(device: str) -> list[str]:
    return ["str" if c in GLANCE_TEXT else "number" for c in glance_columns(device)]


def glance_widths(device: str) -> list[int | str]:
    """A GPU's 18 columns scroll sideways (pixels); a CPU's 8 fit the page (shares of it)."""
    if device_key(device) == "cuda":
        return [GLANCE_WIDE.get(c, 96) for c in glance_columns("cuda")]
    return [f"{GLANCE_CPU_SHARES[c]}%" for c in GLANCE_CPU]


def _significant(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}") if value is not None and math.isfinite(value) else value


def glance_view(glance: pd.DataFrame, device: str) -> pd.DataFrame:
    """The glance table as shown: the device's columns, numbers rounded, gaps left empty."""
    table = glance.reindex(columns=glance_columns(device)).copy()
    for column, digits in _ROUND.items():
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").round(digits)
    for column, digits in _SIGNIFICANT.items():
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").map(
                lambda v, d=digits: _significant(v, d)
            )
    if "idle gaps" in table:
        table["idle gaps"] = pd.to_numeric(table["idle gaps"], errors="coerce").astype(float)
    text = [c for c in table.columns if c in GLANCE_TEXT]
    table[text] = table[text].fillna("")
    return without_nan(table.reset_index(drop=True))


def without_nan(table: pd.DataFrame) -> pd.DataFrame:
    """Gaps as None: a NaN cell reaches API callers as a bare `NaN`, which is not JSON."""
    out = table.astype(object)
    return out.where(table.notna(), None)


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
    s = result.shape
    mask = "causal" if s.get("causal") else "full"
    head = (
        f"**{len(result.ran)} of {len(result.runs)} variants ran** on {result.device_name} at "
        f"B{s['batch']} H{s['heads']} S{s['seq_len']} D{s['head_dim']} {s['dtype']} {mask}."
    )
    peak, _, rest = peak_note(result).partition(": ")
    items = [f"**{peak}:** {rest}" + (f" ({result.peak.source})" if result.peak else "")]
    items += [n for n in result.notes if not n.startswith("% of peak")]
    items += [f"not run — `{r.variant}` ({r.status}): {r.reason}" for r in result.runs if not r.ok]
    # our own Markdown (bold, code) around text from the app and torch: HTML escaped only
    text = [html.escape(t, quote=False) for t in (head, *items)]
    return "\n".join([text[0], "", *(f"- {t}" for t in text[1:])])


_MD_SPECIAL = re.compile(r"([\\`*_\[\]!|~$])")
_MD_LINE_START = re.compile(r"^(\s*)([-+#>]|\d+[.)])", re.MULTILINE)


def _escape_md(text: str) -> str:
    """Text from a trace or a caller, shown in a Markdown component as it is: HTML escaped,
    and the characters that make emphasis, code, links, tables or maths backslash-escaped (a
    kernel named `*mm*` or `[x](http://…)` must not become italics or a link)."""
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
    return _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


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


def compare_page(result: CompareResult, device: str) -> ComparePage:
    """CompareResult → what the tab shows; figures are built here, outside any GPU slot."""
    bars = gpu_cpu_bars(result)
    bars.update_layout(height=420)
    traces = {r.variant: str(r.trace_gz) for r in result.ran if r.trace_gz and r.trace_gz.exists()}
    return ComparePage(
        glance=glance_view(result.glance, device),
        note=compare_note(result),
        bars=bars,
        gantts=mini_gantts(result),
        zip_path=result.zip_path,
        traces=traces,
    )


# -- Diff ---------------------------------------------------------------------------------------
KERNEL_DIFF_TYPES = ["str", "str", "str", *["number"] * 6, "str"]
OPERATOR_DIFF_TYPES = ["str", "str", *["number"] * 9]
# Shares of the page width: the headers carry the labels, so numbers need room to show them.
KERNEL_DIFF_WIDTHS = ["22%", "8%", "8%", *["7%"] * 6, "20%"]
OPERATOR_DIFF_WIDTHS = ["20%", "8%", *["8%"] * 9]
ALLOWED_LABEL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.+()/:@")


@dataclass
class DiffPage:
    headline: str
    kernels: pd.DataFrame
    operators: pd.DataFrame


def diff_label(raw: Any, default: str) -> str:
    """A label for a Diff column header: short, plain characters, or the default when empty."""
    if raw is None:
        return default
    if not isinstance(raw, str):
        raise ConfigError(f"a label must be text, got {show(raw)}")
    text = raw.strip()
    if not text:
        return default
    if len(text) > MAX_LABEL:
        raise ConfigError(f"a label may have at most {MAX_LABEL} characters, got {len(text)}")
    if not set(text) <= ALLOWED_LABEL:
        raise ConfigError(f"label {show(text)} may use letters, digits, spaces and _-.+()/:@ only")
    return text


# An upload is untrusted: whatever breaks while its JSON becomes spans and tables (a list where
# a name or pid goes has raised ValueError inside numpy/pandas) is about that file. It is logged
# and the caller told so, instead of the generic "something unexpected" error.
# (JSON nested too deeply is already a TraceError: profiling.trace says so.)
UPLOAD_FAILURES = (
    ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError, RecursionError,
)  # fmt: skip
UNREADABLE = (
    "could not be read: some of its events do not have the shape torch.profiler writes (a "
    "list or an object where a name, id or time goes?); this has been logged"
)


def upload_stat(path: Any, which: str, missing: str) -> os.stat_result:
    """Check an upload before a byte of it is read: a path to a regular file (not a folder, a
    device or a pipe that would block). Raises ConfigError / TraceError saying what is wrong."""
    if path is None or path == "":
        raise ConfigError(missing)
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"{which} must be an uploaded file, got {show(path)}")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise TraceError(f"{which}: cannot open the upload ({exc.strerror})") from None
    except ValueError:  # a NUL byte in the path
        raise TraceError(f"{which}: cannot open the upload (not a valid file name)") from None
    if not stat.S_ISREG(info.st_mode):
        raise TraceError(f"{which}: the upload is not a regular file")
    return info


def load_upload(path: Any, which: str) -> Trace:
    """An uploaded trace, bounded: size checked before reading, gunzipped size capped."""
    missing = f"upload trace {which} (.json or .json.gz from torch.profiler)"
    size = upload_stat(path, f"trace {which}", missing).st_size
    if size > views.TRACE_MAX_UPLOAD_BYTES:
        raise TraceError(
            f"trace {which} is {_size_text(size)}; the limit is "
            f"{_size_text(views.TRACE_MAX_UPLOAD_BYTES)} (upload the .json.gz)"
        )
    if size == 0:
        raise TraceError(f"trace {which}: the file is empty")
    try:
        return load(path, max_bytes=views.TRACE_MAX_EXPANDED_BYTES)
    except TraceError as exc:
        raise TraceError(f"trace {which}: {exc}") from None
    except UPLOAD_FAILURES:
        log.exception("reading uploaded trace %s failed", which)
        raise TraceError(f"trace {which} {UNREADABLE}") from None


def _size_text(n: int) -> str:
    return (
        f"{n / 1024**2:,.1f} MiB".replace(".0 MiB", " MiB")
        if n >= 1024**2
        else f"{n / 1024:,.0f} KiB"
    )


def _count(n: float) -> str:
    return f"{n:,.0f}" if abs(n - round(n)) < 1e-9 else f"{n:,.2f}"


def _signed_us(us: float) -> str:
    sign = "+" if us > 0 else "−" if us < 0 else "±"
    return f"{sign}{abs(us):,.1f} µs"


def diff_headline(kernels: pd.DataFrame, operators: pd.DataFrame) -> str:
    """One line read off the top rows: what B has more or fewer of than A, and what it costs.

    GPU work when either trace has any, else CPU operators (a CPU run has no kernels). One
    changed name is the whole story ("B has 1 fewer Memcpy DtoD per forward"); several lead
    with the totals and name the largest change.
    """
    la, lb = kernels.attrs.get("labels", operators.attrs.get("labels", ("A", "B")))
    ua, ub = kernels.attrs.get("units", ("per forward", "per forward"))
    per = ua if ua == ub else "per window"  # which windows, and a warning: diff_scopes
    gpu = not kernels.empty
    table, key = (kernels, "kernel") if gpu else (operators, "operator")
    noun = "GPU operation" if gpu else "operator call"  # a kernel, memcpy or memset on a GPU
    items = noun + "s"
    if table.empty:
        return "Nothing to compare: neither trace holds GPU work or CPU operators."
    changed = table[table["delta_count"].abs() > 1e-9]
    measure = "delta_us" if gpu else "delta_self_us"  # operator totals nest, self times do not

    def moved(row: pd.Series) -> str:
        return _signed_us(row[measure]) if gpu else f"self {_signed_us(row[measure])}"

    na, nb = table["count_a"].sum(), table["count_b"].sum()
    if gpu:
        ta, tb = kernels["total_us_a"].sum(), kernels["total_us_b"].sum()
        totals = f"{_count(na)} → {_count(nb)}, {ta:,.1f} → {tb:,.1f} µs, {_signed_us(tb - ta)}"
    else:  # self time: operator totals nest (aten::linear holds aten::mm), self times do not
        ta, tb = operators["self_us_a"].sum(), operators["self_us_b"].sum()
        totals = (
            f"{_count(na)} → {_count(nb)}, self {ta:,.1f} → {tb:,.1f} µs, {_signed_us(tb - ta)}; "
            "no GPU work in either trace"
        )
    if changed.empty:
        top = table.loc[table[measure].abs().idxmax()]
        if abs(top[measure]) < 0.05:
            return f"{lb} and {la} run the same {items} {per}, the same number of times."
        return (
            f"{lb} runs the same {items} as {la} {per} ({totals}); the largest change is "
            f"{_clip(top[key], 60)} ({moved(top)})."
        )
    top = changed.loc[changed[measure].abs().idxmax()]
    word = "more" if top["delta_count"] > 0 else "fewer"
    change = f"{_count(abs(top['delta_count']))} {word} {_clip(top[key], 60)}"
    if len(changed) == 1:
        line = f"{lb} has {change} {per} ({moved(top)}); {items}: {totals}."
    else:
        delta = nb - na
        if abs(delta) < 1e-9:
            lead = f"{lb} runs as many {items} {per} as {la}"
        else:
            many = items if abs(delta) != 1 else noun
            lead = f"{lb} runs {_count(abs(delta))} {'more' if delta > 0 else 'fewer'} {many} "
            lead += f"{per} than {la}"
        line = f"{lead} ({totals}); the largest change: {change} ({moved(top)})."
    return line + _time_change(table, key, top, measure)


def _time_change(table: pd.DataFrame, key: str, counted: pd.Series, measure: str) -> str:
    """The name whose time (`measure`: total for GPU work, self for CPU operators) moved most,
    when that is not the count change named already (a GEMM 450 µs slower outweighs 3 more
    fill_ calls)."""
    top = table.loc[table[measure].abs().idxmax()]
    if top[key] == counted[key] or abs(top[measure]) <= 2 * abs(counted[measure]):
        return ""
    what = "time" if measure == "delta_us" else "self time"
    return f" The largest change in {what}: {_clip(top[key], 60)} ({_signed_us(top[measure])})."


def diff_scopes(kernels: pd.DataFrame) -> str:
    """What each side was counted over; a warning when the two differ."""
    (la, lb), (sa, sb) = kernels.attrs["labels"], kernels.attrs["scopes"]
    ua, ub = kernels.attrs["units"]
    text = f"Counted over: {la}, {sa}; {lb}, {sb}."
    if ua != ub:
        text += (
            f" ⚠ The two are counted over different windows ({ua} against {ub}), so their "
            "figures do not compare like for like: profile both the same way."
        )
    return text


def _rounded(table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    for c in out.columns:
        if c.startswith(("count", "delta_count")):
            out[c] = out[c].astype(float).round(2)
        elif c.endswith("_us") or "_us_" in c:
            out[c] = out[c].astype(float).round(1)
    return out


def diff_page(a: Trace | Path, b: Trace | Path, label_a: str, label_b: str) -> DiffPage:
    """Two traces → headline and the two delta tables (columns named after the labels)."""
    if label_a == label_b:
        raise ConfigError(f"the two labels must differ (both are {show(label_a)})")
    kernels, operators = diff(a, b, label_a, label_b)
    return DiffPage(
        # Markdown on the page: names from an uploaded trace are escaped so they read as text
        headline=_escape_md(f"{diff_headline(kernels, operators)}\n\n{diff_scopes(kernels)}"),
        kernels=labelled(_rounded(kernels)),
        operators=labelled(_rounded(operators)),
    )


def diff_upload_page(trace_a: Any, trace_b: Any, label_a: Any, label_b: Any) -> DiffPage:
    """Two uploaded traces, each bounded like an Analyse upload."""
    la, lb = diff_label(label_a, "A"), diff_label(label_b, "B")
    return diff_page(load_upload(trace_a, "A"), load_upload(trace_b, "B"), la, lb)


def diff_runs_page(run_a: Any, run_b: Any, traces: dict[str, str] | None) -> DiffPage:
    """Two runs of this session's last Compare; the paths come from server-side state only."""
    if not traces:
        raise ConfigError("run a Compare first: the variants that ran can then be diffed here")
    for pick in (run_a, run_b):
        if not isinstance(pick, str) or pick not in traces:
            raise ConfigError(
                f"{show(pick)} is not a run of the last Compare; pick one of: {', '.join(traces)}"
            )
    if run_a == run_b:
        raise ConfigError("pick two different runs")
    paths = [Path(traces[run_a]), Path(traces[run_b])]
    if not all(p.exists() for p in paths):
        raise TraceError(
            "the traces of that Compare have been cleaned up (the app keeps the last few "
            "jobs); run Compare again"
        )
    return diff_page(paths[0], paths[1], run_a, run_b)


def diff_picks(traces: dict[str, str] | None) -> tuple[list[str], str | None, str | None]:
    """Choices for the two compare-set dropdowns and a sensible first pair."""
    names = list(traces or {})
    first = names[0] if names else None
    second = names[1] if len(names) > 1 else first
    return names, first, second


# -- Sweep --------------------------------------------------------------------------------------
SWEEP_GPU_ONLY = ("GPU µs/fwd", "peak MiB")  # empty on a CPU: left out there


def sweep_columns(device: str) -> list[str]:
    cpu = device_key(device) == "cpu"
    return [c for c in SWEEP_COLUMNS if not (cpu and c in SWEEP_GPU_ONLY)]


def sweep_datatypes(device: str) -> list[str]:
    return [
        "str" if c in ("variant", "status", "reason") else "number" for c in sweep_columns(device)
    ]


@dataclass
class SweepPage:
    time: go.Figure
    memory: go.Figure
    table: pd.DataFrame
    zip_path: Path | None


def sweep_view(table: pd.DataFrame, device: str) -> pd.DataFrame:
    """The points as shown: the device's columns, numbers rounded, reasons in full."""
    out = table.reindex(columns=sweep_columns(device)).copy()
    for c in ("GPU µs/fwd", "CPU µs/fwd", "peak MiB", "est. MiB"):
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce").round(1)
    out["TFLOP/s"] = pd.to_numeric(out["TFLOP/s"], errors="coerce").map(
        lambda v: _significant(v, 3)
    )
    out["reason"] = out["reason"].fillna("")
    return without_nan(out.reset_index(drop=True))


def sweep_page(result: SweepResult, device: str) -> SweepPage:
    """SweepResult → the two log–log charts, the table and the zip; built outside the GPU slot."""
    time_fig, memory_fig = sweep_time_figure(result), sweep_memory_figure(result)
    for fig in (time_fig, memory_fig):
        fig.update_layout(height=440)
    return SweepPage(time_fig, memory_fig, sweep_view(result.table, device), result.zip_path)


# -- Analyse ------------------------------------------------------------------------------------
ANALYZE_OPERATOR_COLUMNS = {
    "operator": "Operator",
    "calls": "Calls",
    "total_us": "Total µs",
    "self_us": "Self µs",
    "mean_us": "Mean µs",
    "pct_self": "% of self time",
}


@dataclass
class AnalyzePage:
    summary: str  # HTML
    launch: str  # HTML: the GPU idle & launch block
    operators: pd.DataFrame
    kernels: pd.DataFrame
    figure: FigureSpec  # gr.Plot serialises it with .to_json()


def analyze_operator_view(operators: pd.DataFrame) -> pd.DataFrame:
    digits = dict.fromkeys(("total_us", "self_us", "mean_us", "pct_self"), 1)
    return views.readable(operators, ANALYZE_OPERATOR_COLUMNS, digits)


def rows_html(rows: Sequence[tuple[str, str]], title: str) -> str:
    """(label, text) rows as a titled box, every piece of text escaped (traces are untrusted)."""
    e = lambda t: html.escape(str(t), quote=True)  # noqa: E731
    body = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows)
    return (
        f'<div class="ap-launch"><div class="ap-launch-title">{e(title)}</div>'
        f'<dl class="ap-rows">{body}</dl></div>'
    )


def gantt_window(start: Any, end: Any) -> tuple[float, float] | None:
    """The Gantt's time window from two optional numbers (µs).

    Both empty, or both 0 (what the page's number boxes send untouched): the whole trace.
    """
    if all(v in (None, "") or (type(v) in (int, float) and v == 0) for v in (start, end)):
        return None
    values = []
    for label, value in (("window start", start), ("window end", end)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{label} must be a number of µs (or leave both empty)")
        if not math.isfinite(value) or abs(value) > 1e15:
            raise ConfigError(f"{label} must be a finite number of µs")
        values.append(float(value))
    if values[1] <= values[0]:
        raise ConfigError("the window's end must be after its start")
    return values[0], values[1]


def analyze_page(path: Any, window: tuple[float, float] | None = None) -> AnalyzePage:
    """An uploaded trace → summary, launch block, operator and kernel tables, Gantt.

    Bounded like every upload: its size is checked before reading, its JSON once gunzipped.
    `window` (µs from the first profiled step) draws that slice one bar per span.
    """
    upload_stat(path, "trace", "upload a trace (.json or .json.gz from torch.profiler) to analyse")
    name = Path(path).name
    try:
        result = analyze(
            path, views.TRACE_MAX_UPLOAD_BYTES, views.TRACE_MAX_EXPANDED_BYTES, name=name
        )
    except TraceError:  # a ValueError too: said as it is
        raise
    except UPLOAD_FAILURES:
        log.exception("analysing uploaded trace %s failed", name)
        raise TraceError(f"the trace {UNREADABLE}") from None
    if window is not None and not result.spans.empty:
        first, last = float(result.spans["start_us"].min()), float(result.spans["end_us"].max())
        if window[1] < first or window[0] > last:
            raise ConfigError(
                f"the window {window[0]:,.0f} … {window[1]:,.0f} µs holds no spans: this trace "
                f"runs from {first:,.0f} to {last:,.0f} µs ({gantt_x_title(result.spans)})"
            )
    launch = set(launch_rows(result.launch)) if result.has_gpu else set()
    said = {("note", result.kernel_scope)}  # the kernel-table row below says it already
    rows = [r for r in result.summary if r not in launch and r not in said]
    rows.insert(2, ("kernel table", result.kernel_scope))
    title = f"{name} · {result.n_spans:,} spans"
    return AnalyzePage(
        summary=rows_html(rows, "Summary"),
        launch=views.launch_html(result.launch),
        operators=analyze_operator_view(result.operators),
        kernels=views.kernel_view(result.kernels),
        figure=gantt_spec(result.spans, result.lanes, title=title, window=window),
    )
