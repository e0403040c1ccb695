"""The History tab (issue 34): the run store's runs, filtered, newest first; open one (its
Profile view rebuilt without a GPU, at the permalink `?run=<id>`), diff two, compare several,
and draw one workload's trend with its regressions.

Raw inputs → profiling.store.query (filters checked there) → profiling.views.history and
profiling.views.reopen → components. Every handler is also an API endpoint (/history,
/history_run, /history_diff, /history_compare, /history_trend). A stored trace is read as an
upload is (profiling.views.upload_worker), and the page names the store by its file name only.

A failed button leaves no badge on its panels (each event's `.failure` empties them; the
message is the toast's), and a permalink whose run cannot be opened says why in the Run panel.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import gradio as gr

from attention import VARIANTS
from profiling.page.controls import kernel_table, table
from profiling.page.errors import said_instead, translated
from profiling.page.listeners import QUIET, download_button, enabled_downloads, no_file
from profiling.page.style import STRIP_CSS
from profiling.store import open_store, query
from profiling.store.trend import RULE
from profiling.user_values import ConfigError
from profiling.views import history as views_history
from profiling.views import reopen as views_reopen
from profiling.views import shared as views_shared
from profiling.views import upload_worker
from profiling.views.diff import escape_markdown
from profiling.vocabulary import MODES
from profiling.workload.model.spec import IMPLEMENTATIONS as MODEL_IMPLEMENTATIONS
from profiling.workload.model.spec import MODES as MODEL_MODES

# a model run's implementation is its variant (issue 43): "eager", "flex_attention" listed too
FILTERED_VARIANTS = ["", *dict.fromkeys([*VARIANTS, *MODEL_IMPLEMENTATIONS])]
TRACE, OPENED = 9, 14  # history_run's outputs: the trace's place, and how many in all
COPIES = views_shared.RunDirs()  # served copies of reopened traces (Gradio serves temp files)
OFF = "The run store is off (ATTNPROF_STORE=off): nothing is kept."
RULE_NOTE = f"*Regression rule:* {RULE}"
SHARED = (
    "**Every visitor sees every run.** This store is shared: anyone who opens this page (or "
    "calls its API) can list, open, diff and download every run kept here, yours and other "
    "visitors' (workload, device, figures, trace). Uploads to Diff and Analyse are never "
    "kept. Run the app on your own machine to keep your runs to yourself."
)
# a permalink opens the History tab: the tab's button is clicked once the page has loaded
OPEN_TAB_JS = """() => { if (new URLSearchParams(window.location.search).get("run")) {
  const tab = [...document.querySelectorAll('[role="tab"]')]
    .find((b) => b.textContent.trim() === "History");
  if (tab) tab.click(); } }"""


def _store() -> Any:
    found = open_store()
    if found is None:
        raise ConfigError(OFF)
    return found


def history(
    variant: str = "", shape: str = "", mode: str = "", device: str = "", since: str = "",
    until: str = "", limit: float = query.DEFAULT_ROWS,
) -> tuple[Any, str]:  # fmt: skip
    """The stored runs, newest first, narrowed by any of the filters.

    Args:
        variant: a variant id, e.g. "sdpa-flash", or a model run's implementation, e.g.
            "flex_attention" (empty: any).
        shape: part of the shape text, e.g. "S1024" or "bfloat16" (empty: any).
        mode: "forward", "backward" or "train"; a model run's "prefill" or "decode" (empty:
            any).
        device: part of the device's name, e.g. "H200", or "cpu" / "cuda" (empty: any).
        since: first day, YYYY-MM-DD (UTC; empty: no bound).
        until: last day, YYYY-MM-DD (UTC; empty: no bound).
        limit: the newest rows to return (1–10,000; default 200).

    Returns:
        the runs table (id, time, workload, device, status, figures, trace kept or pruned) and
        a note saying how many matched.
    """
    with translated("history", "listing the stored runs"):
        raw = dict(variant=variant, shape=shape, mode=mode, device=device, since=since,
                   until=until, limit=limit)  # fmt: skip
        filters = query.checked_filters(**raw)
        store = _store()
        runs, total = query.list_runs(store, filters)
        note = views_history.history_note(len(runs), total, store, full_path=False)
        return views_history.history_view(runs), note


def _served(path: Path | None, name: str) -> str | None:
    """A copy of a stored trace in a temp folder Gradio may serve (the store may be anywhere),
    under the run's readable name (the store keeps it under its content hash)."""
    if path is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="attnprof-history-"))
    COPIES.add(folder)
    return str(shutil.copyfile(path, folder / name))


def history_run(run_id: str) -> tuple[Any, ...]:
    """One stored run's view, rebuilt from the store and its kept trace (no GPU): a variant's
    Profile view, or a model run's Model views (issue 43).

    Args:
        run_id: the run's id, as History lists it (also the permalink's ?run=).

    Returns:
        where the run came from, the summary strip (HTML), the Gantt (plotly), the kernel
        table, the roles table, the roofline chart and table, the operator table, the summary
        (JSON) and the trace (.json.gz; empty when it was pruned); then, for a model run (else
        empty), its row of the "which attn_implementation?" table, the step's µs by category,
        attention per decoder layer, and what ran and SDPA's reasons (Markdown).
    """
    with translated("history_run", "opening the run"):
        store = _store()
        picked = views_history.picked_ids(run_id, 1, 1, "to open")[0]
        found = views_reopen.reopened(store, picked)
        trace = _served(found.trace, found.download_name)
        model = found.model
        if model is not None:
            return (found.origin, model.strip, model.gantt, None, None, None, None, None,
                    model.summary, trace, model.table, model.categories, model.layers,
                    model.why)  # fmt: skip
        shown = found.page
        return (found.origin, shown.strip, shown.figure, shown.kernels, shown.roles,
                shown.roofline_figure, shown.roofline, shown.operators, shown.summary,
                trace, None, None, None, "")  # fmt: skip


def history_diff(run_ids: str) -> tuple[Any, ...]:
    """The Diff view of two stored runs, from their kept traces.

    Args:
        run_ids: two run ids, separated by a comma or a space.

    Returns:
        the headline (Markdown), the kernel, operator and role delta tables.
    """
    with translated("history_diff", "diffing the runs"):
        paths_and_labels = views_history.diff_inputs(_store(), run_ids)
        shown = upload_worker.run_upload("stored_diff", *map(str, paths_and_labels))
        # Markdown with the traces' names and the rows' labels escaped: text, never markup
        return escape_markdown(shown.headline), shown.kernels, shown.operators, shown.roles


def history_compare(run_ids: str) -> Any:
    """Stored runs side by side (any devices, e.g. an H100 and an H200 at one shape), from
    their stored figures, without running anything.

    Args:
        run_ids: two or more run ids, separated by commas or spaces.

    Returns:
        a table: each run's device, workload, median GPU and CPU µs, IQR, × the first run's
        time, TFLOP/s, TB/s, peak MiB, errors, clocks, driver and versions.
    """
    with translated("history_compare", "comparing the stored runs"):
        return views_history.compare_runs(_store(), run_ids)


def history_trend(run_id: str) -> tuple[Any, str]:
    """One workload over time: every stored run of the workload of `run_id` on its device,
    each point's IQR, and the runs flagged as regressions (the rule is in the note).

    Args:
        run_id: any run of the workload.

    Returns:
        the trend chart (plotly) and a note naming the regressions and the rule.
    """
    with translated("history_trend", "drawing the trend"):
        store = _store()
        picked = views_history.picked_ids(run_id, 1, 1, "to draw its workload's trend")[0]
        points = views_history.trend_table(store, picked)
        shape = views_history.stored_run(store, points["id"].iloc[-1])["shape"]
        title = views_shared.escaped(f"Trend · {shape}")  # plotly reads tags in a title
        return views_history.trend_figure(points, title), views_history.trend_note(points)


def add_picked(picked: str, event: gr.SelectData) -> str:
    """A click on a row of the runs table adds its run to the picked ids."""
    row = event.row_value if event.row_value else []
    run_id = str(row[0]) if row else ""
    ids = [i for i in (picked or "").replace(",", " ").split() if i]
    if run_id and run_id not in ids:
        ids.append(run_id)
    return " ".join(ids)


def from_permalink(request: gr.Request) -> str:
    """The `?run=<id>` of the page's address, into the picked ids."""
    params = getattr(request, "query_params", None) or {}
    return str(params.get("run", "") or "")[:64]


def _filters() -> list[Any]:
    """The filters, in history()'s order."""
    with gr.Row():
        variant = gr.Dropdown(choices=FILTERED_VARIANTS, value="", label="Variant",
                              elem_id="history-variant", filterable=True)  # fmt: skip
        shape = gr.Textbox("", label="Shape contains", placeholder="S1024",
                           elem_id="history-shape")  # fmt: skip
        mode = gr.Dropdown(choices=["", *dict.fromkeys([*MODES, *MODEL_MODES])], value="",
                           label="Mode", elem_id="history-mode")  # fmt: skip
        device = gr.Textbox("", label="Device contains", placeholder="H200, cpu",
                            elem_id="history-device")  # fmt: skip
        # a value ("") for each: the API's bare /history call takes every default
        since = gr.Textbox("", label="Since (YYYY-MM-DD)", elem_id="history-since")
        until = gr.Textbox("", label="Until (YYYY-MM-DD)", elem_id="history-until")
        limit = gr.Number(value=query.DEFAULT_ROWS, label="Rows", precision=0,
                          elem_id="history-limit")  # fmt: skip
    return [variant, shape, mode, device, since, until, limit]


def _opened() -> tuple[list[Any], list[gr.Column]]:
    """A reopened run's view, in history_run()'s order, and the two columns of which one is
    shown: a variant's Profile tables, or a model run's Model tables (issue 43)."""
    origin = gr.Markdown("", label="Run origin", show_label=False, elem_id="history-origin")
    strip = gr.HTML(
        "",
        label="Summary strip",
        show_label=False,
        elem_id="history-summary",
        css_template=STRIP_CSS,
    )
    gantt = gr.Plot(label="Timeline: CPU ops and GPU kernels", elem_id="history-gantt")
    with gr.Column(visible=False) as model_column:
        model = _model_opened()
    with gr.Column() as variant_column:
        kernels = kernel_table("GPU kernels per step", "history-kernels")  # any machine's run
        roles = table("Kernels by role in attention (µs per step)", "history-roles")
        roofline_plot = gr.Plot(label="Roofline: each kernel", elem_id="history-roofline")
        roofline = table("Roofline per kernel", "history-roofline-table")
        operators = table("Operators (torch.profiler key_averages)", "history-operators")
    with gr.Accordion("Summary as JSON", open=False):
        summary = gr.JSON(label="summary", elem_id="history-summary-json")
    trace = download_button("Trace .json.gz (Perfetto)", "history-download-gz")
    opened = [origin, strip, gantt, kernels, roles, roofline_plot, roofline, operators, summary,
              trace, *model]  # fmt: skip
    return opened, [variant_column, model_column]


def _model_opened() -> list[Any]:
    """A reopened model run's Model views (the Model tab's, for its one implementation)."""
    compared = table("Which attn_implementation? (this run)", "history-model-table",
                     max_chars=160)  # fmt: skip
    categories = table("The step, µs by category (they add up to the step)",
                       "history-model-categories")  # fmt: skip
    layers = table("Attention per decoder layer", "history-model-layers")
    reasons = gr.Markdown(label="What ran, and why", elem_id="history-model-why")
    return [compared, categories, layers, reasons]


def show_columns(summary: Any) -> tuple[Any, Any]:
    """The model run's tables where one was opened (its summary names its model), else the
    variant's (page only)."""
    model = isinstance(summary, dict) and isinstance(summary.get("model"), dict)
    return gr.Column(visible=not model), gr.Column(visible=model)


def _diffed() -> list[Any]:
    headline = gr.Markdown("", label="Headline", show_label=False, elem_id="history-diff-headline")
    kernels = table("Kernels: B − A", "history-diff-kernels")
    operators = table("Operators: B − A", "history-diff-operators")
    roles = table("By role in attention", "history-diff-roles")
    return [headline, kernels, operators, roles]


def build() -> None:
    """The History tab and its listeners (/history, /history_run, /history_diff,
    /history_compare, /history_trend), and the permalink that opens a run on load."""
    with gr.Tab("History", id="history"):
        gr.Markdown(
            "Every run of Profile, Compare, Sweep and Model (here, through the API or the CLI) "
            "is kept in the run store; a model run as one run per implementation (kind "
            "`model`). Click rows to pick runs, then **Open** one (its Profile or Model view, "
            "rebuilt without a GPU; its permalink is `?run=<id>`), **Diff** two (a model run "
            "against another, or against a variant's), **Compare** several (any devices), or "
            "draw the **Trend** of one run's workload.\n\n" + SHARED,
            elem_id="history-intro",
        )
        filters = _filters()
        refresh = gr.Button("List runs", elem_id="history-refresh")
        note = gr.Markdown("", label="Note", show_label=False, elem_id="history-note")
        runs = table("Stored runs, newest first (click a row to pick it)", "history-runs",
                     max_height=360)  # fmt: skip
        picked = gr.Textbox(label="Picked runs (ids)", elem_id="history-picked")
        with gr.Row():
            buttons = [gr.Button(label, elem_id=f"history-{name}-button") for name, label in
                       (("open", "Open"), ("diff", "Diff two"), ("compare", "Compare"),
                        ("trend", "Trend"), ("clear", "Clear picks"))]  # fmt: skip
        with gr.Accordion("Run", open=True):
            opened, columns = _opened()
        with gr.Accordion("Diff", open=True):
            diffed = _diffed()
        compared = table("Compare: stored figures side by side", "history-compare")
        trend_plot = gr.Plot(label="Trend: median per step, IQR bars", elem_id="history-trend")
        trend_note = gr.Markdown(
            RULE_NOTE,
            label="Trend note",
            show_label=False,
            elem_id="history-trend-note",
        )
    _listen(filters, refresh, note, runs, picked, buttons, (opened, columns), diffed, compared,
            (trend_plot, trend_note))  # fmt: skip


def _listen(filters, refresh, note, runs, picked, buttons, run_panel, diffed, compared, trend):
    """Each button to its handler (each an API endpoint), and the page load's permalink. A
    failed event's panels are emptied by its `.failure` (no red badge on each; the toast says
    why, once)."""
    open_button, diff_button, compare_button, trend_button, clear_button = buttons
    opened, columns = run_panel
    listed = refresh.click(history, filters, [runs, note], api_name="history")
    listed.failure(lambda: (None, ""), None, [runs, note], **QUIET)
    runs.select(add_picked, picked, picked, **QUIET)
    clear_button.click(lambda: "", None, picked, **QUIET)
    shown = open_button.click(history_run, picked, opened, api_name="history_run")
    shown.success(enabled_downloads, opened[TRACE : TRACE + 1], opened[TRACE : TRACE + 1], **QUIET)
    shown.success(show_columns, opened[TRACE - 1], columns, **QUIET)
    shown.failure(_not_opened, None, opened, **QUIET)
    shown.failure(lambda: show_columns(None), None, columns, **QUIET)
    diff = diff_button.click(history_diff, picked, diffed, api_name="history_diff")
    diff.failure(lambda: ("", None, None, None), None, diffed, **QUIET)
    shown_compare = compare_button.click(history_compare, picked, compared,
                                         api_name="history_compare")  # fmt: skip
    shown_compare.failure(lambda: None, None, compared, **QUIET)
    drawn = trend_button.click(history_trend, picked, list(trend), api_name="history_trend")
    drawn.failure(lambda: (None, RULE_NOTE), None, list(trend), **QUIET)
    loaded = gr.on(None, from_permalink, None, picked, js=OPEN_TAB_JS, **QUIET)
    opened_on_load = loaded.then(_list_and_open, [picked, *filters], [runs, note, *opened],
                                 **QUIET)  # fmt: skip
    opened_on_load.then(show_columns, opened[TRACE - 1], columns, **QUIET)
    trace = opened[TRACE : TRACE + 1]  # a permalink's run: its download enabled, as Open's
    opened_on_load.then(enabled_downloads, trace, trace, **QUIET)


def _not_opened(said: str = "") -> tuple[Any, ...]:
    """The Run panel with nothing of an earlier run (its download disabled), `said` on top."""
    return (said, "", None, None, None, None, None, None, None, no_file(), None, None, None, "")


def _list_and_open(picked: str, *filters: Any) -> tuple[Any, ...]:
    """On load: the runs listed; a permalink's run opened as well, or, where it cannot be, the
    reason in the Run panel (an event on load shows no toast: badges alone said nothing)."""
    listed: Any = (None, OFF)
    if open_store() is not None:
        listed, said = said_instead("history", "listing the stored runs", history, *filters)
        listed = listed or (None, escape_markdown(said))
    if not picked:
        return (*listed, *([gr.skip()] * OPENED))
    found, said = said_instead("history_run", "opening the run", history_run, picked)
    if found is None:
        return (*listed, *_not_opened(f"**Run not opened:** {escape_markdown(said)}"))
    return (*listed, *found)
