"""A stored run's Profile view, rebuilt without a GPU: its Summary from the store, and
everything the trace holds (Gantt, kernel and role tables, launch block) from its kept trace,
read by the same reader a run uses (profiling.run.trace), so the figures are the run's own.

A run whose trace was pruned (the store's size cap) still shows its stored summary and tables,
and says the trace is gone. Pure (no gradio); it imports views_profile, whose variant labels
need the `attention` registry, so the page (which has it loaded already) is its caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.summary import Summary
from profiling.run import trace as run_trace
from profiling.store import Store, query
from profiling.trace.events import TraceError
from profiling.views import profile as views_profile
from profiling.views.history import stored_summary, stored_trace
from profiling.views.shared import escaped, kernel_view, role_view, roofline_view
from profiling.views.text.summary import unit
from profiling.views.timing import timing_html
from profiling.vocabulary import MODE_PHASES, measured_span


@dataclass
class StoredResult:
    """What views_profile.page reads of a ProfileResult, from the store and the kept trace."""

    config: dict[str, Any]
    summary: Summary
    operators: pd.DataFrame
    kernels: pd.DataFrame
    trace: run_trace.RunTrace
    trace_gz: Path
    trace_json: Path | None = None
    table_txt: Path | None = None
    memory_snapshot: Path | None = None
    run_json: Path | None = None
    memory_timeline: Any = None


def reopened(store: Store, run_id: Any) -> tuple[views_profile.Page, str]:
    """(the run's Profile page, a note on where it came from) for `?run=<id>`."""
    run = query.get_run(store, run_id)
    summary = stored_summary(run)
    tables = query.children(store, run["id"])
    try:
        trace_file = stored_trace(store, run)
    except TraceError as gone:
        return _without_trace(summary, tables), f"{_origin(run)} {gone}"
    mode = summary.mode
    trace = run_trace.read(trace_file, measured_span(mode), MODE_PHASES[mode])
    result = StoredResult(
        config=run, summary=summary, operators=tables["operators"], kernels=trace.kernels,
        trace=trace, trace_gz=trace_file,
    )  # fmt: skip
    roofline = tables["roofline"]
    return views_profile.page(result, roofline=roofline), _origin(run)


def kept_trace(store: Store, run_id: Any) -> Path | None:
    """The run's kept trace file (None when it did not run or its trace was pruned)."""
    try:
        return stored_trace(store, query.get_run(store, run_id))
    except TraceError:
        return None


def _origin(run: dict[str, Any]) -> str:
    from profiling.views.history import when

    return (
        f"Run `{run['id']}` from {when(run['created'])} UTC ({run['kind']}, {run['origin']}, "
        f"{run['device_name'] or run['device']}), reopened from the store."
    )


def _without_trace(summary: Summary, tables: dict[str, pd.DataFrame]) -> views_profile.Page:
    """The stored figures and tables of a run whose trace is gone: no Gantt, no launch block."""
    gone = '<div class="ap-extra">trace pruned: the Gantt and launch figures are gone</div>'
    kernels = tables["kernels"]
    if kernels["phase"].isna().all():
        kernels = kernels.drop(columns="phase")
    roles = tables["roles"]
    if roles["phase"].isna().all():
        roles = roles.drop(columns="phase")
    return views_profile.Page(
        strip=views_profile.summary_html(summary) + gone + timing_html(summary),
        summary=views_profile.summary_json(summary),
        operators=views_profile.operator_view(tables["operators"], summary.device),
        kernels=kernel_view(kernels),
        kernel_note=f"Per {unit(summary)}, as stored (the trace was pruned).",
        figure=None,
        roles=role_view(roles),
        roofline=roofline_view(tables["roofline"]),
    )


def reopened_title(run: dict[str, Any]) -> str:
    return escaped(f"{run['variant']} · {run['shape']} · {run['device_name']}")
