"""What the Analyse tab shows for any uploaded torch.profiler trace: a summary, the GPU idle &
launch block, the operator and kernel tables, and a Gantt (a window of it at full detail).

Pure functions (no gradio). The upload is checked in profiling.views.uploads, the window here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.analyze import analyze
from profiling.analysis.columns import TRACE_OPERATOR_COLUMNS
from profiling.analysis.launch import launch_rows
from profiling.gantt.spec import FigureSpec, gantt_spec, gantt_x_title
from profiling.trace.events import TraceError
from profiling.user_values import ConfigError
from profiling.views import shared as views_shared
from profiling.views.roofline_figure import roofline_spec
from profiling.views.uploads import UNREADABLE, UPLOAD_FAILURES, upload_stat

log = logging.getLogger(__name__)


@dataclass
class AnalyzePage:
    summary: str  # HTML
    launch: str  # HTML: the GPU idle & launch block
    operators: pd.DataFrame
    kernels: pd.DataFrame
    figure: FigureSpec  # gr.Plot serialises it with .to_json()
    roles: pd.DataFrame | None = None  # µs by role in attention, the kernel table's scope
    roofline_figure: FigureSpec | None = None  # kernels the recorded shapes can place
    roofline: pd.DataFrame | None = None  # per kernel; "not placed" rows say why


def analyze_operator_view(operators: pd.DataFrame) -> pd.DataFrame:
    """The trace's operators under readable headers, times and shares to 0.1."""
    digits = dict.fromkeys(("total_us", "self_us", "mean_us", "pct_self"), views_shared.DIGITS)
    return views_shared.readable(operators, TRACE_OPERATOR_COLUMNS, digits)


NO_KERNELS = (
    "No GPU kernels: this trace holds CPU work only, so there is no kernel table. "
    "A trace recorded on a GPU lists its kernels here."
)


def kernel_table_note(kernels: pd.DataFrame | None) -> str:
    """Why the kernel table is hidden ("" when it has rows): an empty table with its fifteen
    headers cut short looked like a result. A row counts if it names a kernel."""
    if kernels is None or kernels.empty:
        return NO_KERNELS
    names = kernels.iloc[:, 0].astype(str).str.strip()
    return "" if (names != "").any() else NO_KERNELS


def rows_html(rows: Sequence[tuple[str, str]], title: str) -> str:
    """(label, text) rows as a titled box, every piece of text escaped (traces are untrusted)."""
    body = "".join(
        f"<dt>{views_shared.escaped(k)}</dt><dd>{views_shared.escaped(v)}</dd>" for k, v in rows
    )
    return (
        f'<div class="ap-launch"><div class="ap-launch-title">{views_shared.escaped(title)}</div>'
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


def analyze_page(
    path: Any,
    window: tuple[float, float] | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> AnalyzePage:
    """An uploaded trace → summary, launch block, operator and kernel tables, Gantt.

    Bounded like every upload: its size is checked before reading, its JSON once gunzipped.
    `window` (µs from the first profiled step) draws that slice one bar per span.
    """
    upload_stat(path, "trace", "upload a trace (.json or .json.gz from torch.profiler) to analyse")
    name = Path(path).name
    try:
        limits = views_shared.TRACE_MAX_UPLOAD_BYTES, views_shared.TRACE_MAX_EXPANDED_BYTES
        result = analyze(path, *limits, name=name, progress=progress)
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
        launch=views_shared.launch_html(result.launch),
        operators=analyze_operator_view(result.operators),
        kernels=views_shared.kernel_view(result.kernels, result.kernel_unit),
        figure=gantt_spec(result.spans, result.lanes, title=title, window=window),
        roles=views_shared.role_view(result.roles, result.kernel_unit),
        roofline_figure=roofline_spec(result.roofline, result.device_name, result.dtype),
        roofline=views_shared.roofline_view(result.roofline),
    )
