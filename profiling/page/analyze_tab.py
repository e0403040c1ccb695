"""The Analyse tab: any torch.profiler trace a user uploads, read on the CPU and shown like a run.

Upload → views_analyze.gantt_window, then analyze_page in a worker process (profiling.
upload_worker: bounded in memory and time, the size checked before a byte is parsed) →
components; names from the trace are shown as text everywhere.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from profiling.analysis import columns
from profiling.page.controls import kernel_table, roofline_table, table
from profiling.page.errors import guarded
from profiling.page.listeners import (
    QUIET,
    TRACE_JOB,
    clear_on_failure,
    progress_callback,
    trace_job,
)
from profiling.page.style import ROWS_CSS
from profiling.views import analyze as views_analyze
from profiling.views import shared as views_shared
from profiling.views import upload_worker


def analyze(
    trace: str | None,
    window_start_us: float | None = None,
    window_end_us: float | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
) -> tuple[Any, ...]:
    """Operator table, kernel table, Gantt and summary of any torch.profiler Chrome trace.

    Args:
        trace: a Chrome trace (.json or .json.gz) exported by torch.profiler, at most 200 MiB
            uploaded and 3 GiB once gunzipped (read as a stream: ~10⁷ events).
        window_start_us: optional start of the Gantt's window, µs from the first profiled step.
        window_end_us: optional end of that window; with both set the slice is drawn one bar
            per span (a large trace is otherwise drawn at reduced detail).

    Returns:
        summary (HTML), GPU idle & launch overhead (HTML), operator table (cpu_op and
        record_function spans, counted as key_averages counts them), kernel table, Gantt chart
        (plotly), µs by role in attention, the roofline chart (kernels the trace's recorded
        shapes or bytes can place) and the per-kernel roofline table ("not placed" rows say
        why).
    """
    window = guarded("analyze", views_analyze.gantt_window, window_start_us, window_end_us,
                     doing="reading the window")  # fmt: skip
    shown = guarded("analyze", analyze_upload, trace, window, progress_callback(progress),
                    doing="reading the trace")  # fmt: skip
    return (shown.summary, shown.launch, shown.operators, shown.kernels, shown.figure,
            shown.roles, shown.roofline_figure, shown.roofline)  # fmt: skip


def analyze_upload(trace: Any, window: Any, progress: Any) -> views_analyze.AnalyzePage:
    """views_analyze.analyze_page in a worker process, bounded in memory and time."""
    return upload_worker.run_upload("analyze", trace, window, progress=progress)


def _inputs() -> list[Any]:
    """The upload and the optional Gantt window, in analyze()'s order."""
    upload = gr.File(
        label="Trace (.json / .json.gz)", file_types=[".json", ".gz"], elem_id="an-file"
    )
    with gr.Row():
        window_start = gr.Number(
            None,
            label="Gantt window from (µs)",
            elem_id="an-from",
            precision=None,
            info="optional: µs from the first profiled step (0 and 0: whole trace)",
        )
        window_end = gr.Number(
            None,
            label="to (µs)",
            elem_id="an-to",
            precision=None,
            info="both set: that slice drawn one bar per span (large traces are "
            "otherwise drawn at reduced detail, aggregated spans in grey)",
        )
    return [upload, window_start, window_end]


def _results() -> list[Any]:
    """Summary, launch block, the two tables and the Gantt, in the order of analyze()'s outputs
    (laid out in the page's), then the page-only line that says why the kernel table is hidden."""
    summary = gr.HTML("", label="Summary", elem_id="an-summary", css_template=ROWS_CSS)
    launch = gr.HTML("", label="CPU launch cost", elem_id="an-launch", css_template=ROWS_CSS)
    gantt = gr.Plot(label="Timeline", elem_id="an-gantt")
    operators = table(
        "Operators and record_function spans (whole trace, counted as key_averages)",
        "an-operators",
        headers=list(columns.TRACE_OPERATOR_COLUMNS.values()),
        datatype=["str", *["number"] * 5],
        max_chars=90,
    )
    kernel_note = gr.Markdown("", elem_id="an-kernel-note")
    kernels = kernel_table("GPU kernels, names decoded", "an-kernels")
    roles = table("Kernels by role", "an-roles", max_height=360)  # "in attention": title_roles
    roofline_plot = gr.Plot(label="Roofline (kernels the trace's shapes or bytes place)",
                            elem_id="an-roofline")  # fmt: skip
    roofline = roofline_table("Roofline per kernel", "an-roofline-table")
    return [summary, launch, operators, kernels, gantt, roles, roofline_plot, roofline,
            kernel_note]  # fmt: skip


def title_roles(roles: Any) -> Any:
    """The role table says "in attention" only of an attention trace's kernels."""
    return gr.update(label=views_shared.roles_title(roles, "Kernels by role"))


def show_kernels(kernels: Any) -> tuple[Any, str]:
    """The kernel table shown only when the trace has kernels; otherwise a line says why."""
    why = views_analyze.kernel_table_note(kernels)
    return gr.Dataframe(visible=not why), why


def build() -> None:
    """The Analyse tab and /analyze."""
    with gr.Tab("Analyse", id="analyze"):
        gr.Markdown(
            "Upload a Chrome trace from any torch.profiler run (`.json` or `.json.gz`, at most "
            f"{views_shared.TRACE_MAX_UPLOAD_BYTES // 1024**2} MiB, "
            f"{views_shared.TRACE_MAX_EXPANDED_BYTES / 1024**3:g} GiB once gunzipped): operator "
            "table, kernel table, GPU idle & launch figures and a Gantt chart."
        )
        inputs = _inputs()
        button = gr.Button("Analyse", variant="primary", elem_id="analyze-button")
        *outputs, kernel_note = _results()
    analysed = button.click(
        trace_job(analyze), inputs=inputs, outputs=outputs, api_name="analyze", **TRACE_JOB
    )
    clear_on_failure(analysed, [*outputs, kernel_note])
    kernels, roles = outputs[3], outputs[5]
    analysed.success(show_kernels, kernels, [kernels, kernel_note], **QUIET)
    analysed.success(title_roles, roles, roles, **QUIET)
