"""A stored run's Profile view, rebuilt without a GPU: its Summary from the store, and
everything the trace holds (Gantt, kernel and role tables, launch block) from its kept trace,
read by the same reader a run uses (profiling.run.trace), so the figures are the run's own.

A run whose trace was pruned (the store's size cap) still shows its stored summary and tables,
and says the trace is gone. A model run (issue 43) is shown as the Model tab shows it
(profiling.views.model.stored): its views from the stored summary, its Gantt from the trace.
The trace is read in the upload worker, under an upload's limits
(profiling.views.upload_worker; a store may be imported: its traces are a stranger's bytes).
No gradio; it imports views_profile, whose variant labels need the `attention` registry, so
the page (which has it loaded already) is its caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.summary import Summary
from profiling.store import Store, query
from profiling.store.model_summary import MODEL_KINDS
from profiling.trace.events import TraceError
from profiling.views import profile as views_profile
from profiling.views import upload_worker
from profiling.views.diff import escape_markdown
from profiling.views.history import (
    TraceFigures,
    download_name,
    id_markdown,
    stored_run,
    stored_summary,
    stored_trace,
    when,
)
from profiling.views.model import stored as model_stored
from profiling.views.shared import escaped, kernel_view, role_view, roofline_view
from profiling.views.text.summary import unit
from profiling.views.timing import timing_html


@dataclass
class StoredResult:
    """What views_profile.page reads of a ProfileResult, from the store and the kept trace."""

    config: dict[str, Any]
    summary: Summary
    operators: pd.DataFrame
    kernels: pd.DataFrame
    trace: TraceFigures
    trace_gz: Path
    trace_json: Path | None = None
    table_txt: Path | None = None
    memory_snapshot: Path | None = None
    run_json: Path | None = None
    memory_timeline: Any = None


@dataclass
class Reopened:
    """A stored run as the History tab shows it: a variant's Profile view, or a model's."""

    page: views_profile.Page | None  # None for a model run
    origin: str  # where it came from (Markdown)
    trace: Path | None  # its kept trace (None: it did not run, or the trace was pruned)
    download_name: str  # the name the trace is served under: the run's readable tag
    model: model_stored.ModelPage | None = None  # a model run's views (issue 43)


def reopened(store: Store, run_id: Any) -> Reopened:
    """A run's Profile view for `?run=<id>`, its origin, and its trace to download."""
    run = stored_run(store, run_id)
    if run["kind"] in MODEL_KINDS:
        return _reopened_model(store, run)
    summary = stored_summary(run)
    tables = query.children(store, run["id"])
    try:
        trace_file = stored_trace(store, run)
    except TraceError as gone:
        origin = f"{_origin(run)} {escape_markdown(str(gone))}"
        return Reopened(_without_trace(summary, tables), origin, None, download_name(run))
    figures = upload_worker.run_upload(
        "stored", str(trace_file), summary.mode, views_profile.run_title(summary)
    )
    result = StoredResult(
        config=run, summary=summary, operators=tables["operators"], kernels=figures.kernels,
        trace=figures, trace_gz=trace_file,
    )  # fmt: skip
    page = views_profile.page(result, roofline=tables["roofline"])
    return Reopened(page, _origin(run), trace_file, download_name(run))


def _reopened_model(store: Store, run: dict[str, Any]) -> Reopened:
    """A model run's views from its stored summary, its Gantt from its kept trace (read in the
    upload worker); a pruned trace leaves the views and says the Gantt is gone."""
    result = model_stored.stored_model(run)
    summary = json.loads(run["summary_json"])
    name = model_stored.download_name(run)
    try:
        trace_file = stored_trace(store, run)
    except TraceError as gone:
        page = model_stored.model_page(result, None, summary)
        return Reopened(None, f"{_origin(run)} {escape_markdown(str(gone))}", None, name, page)
    gantt = upload_worker.run_upload("stored_model", str(trace_file), model_stored.model_title(run))
    return Reopened(None, _origin(run), trace_file, name,
                    model_stored.model_page(result, gantt, summary))  # fmt: skip


def _origin(run: dict[str, Any]) -> str:
    """Markdown: every value from the row escaped (an imported store's text is a stranger's)."""
    said = [run["kind"], run["origin"], run["device_name"] or run["device"]]
    where = ", ".join(escape_markdown(str(x)) for x in said)
    return (
        f"Run {id_markdown(run['id'])} from {when(run['created'])} UTC ({where}), "
        "reopened from the store."
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
