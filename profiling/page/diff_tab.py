"""The Diff tab: what changed between two traces, uploaded or two runs of the last Compare.

Both read traces on the CPU (listeners.TRACE_JOB), two uploads in a worker process bounded in
memory and time (profiling.views.upload_worker); the runs' paths come from the session's server-side
state only, never from the client.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from profiling.page.controls import table
from profiling.page.errors import guarded
from profiling.page.listeners import QUIET, TRACE_JOB, trace_job
from profiling.views import diff as views_diff
from profiling.views import shared as views_shared
from profiling.views import upload_worker

# (label, elem_id, datatypes) of the kernel and the operator delta tables; their widths come
# from their content (the headers carry the labels: shares of the page broke "in_place")
DELTA_TABLES = (
    ("Kernels: per name, per window", "kernel-delta", views_diff.KERNEL_DIFF_TYPES),
    ("Operators (cpu_op spans): per name, per window", "operator-delta",
     views_diff.OPERATOR_DIFF_TYPES),
)  # fmt: skip


def diff(
    trace_a: str | None, trace_b: str | None, label_a: str = "", label_b: str = ""
) -> tuple[Any, ...]:
    """Per-kernel and per-operator deltas between two torch.profiler traces (B − A).

    Args:
        trace_a: trace A, a Chrome trace (.json or .json.gz) from torch.profiler.
        trace_b: trace B, the same.
        label_a: A's name in the tables (default "A").
        label_b: B's name in the tables (default "B").

    Returns:
        the headline as plain text (what changed, then a line saying what each side was
        counted over), the kernel delta table, the operator delta table (per window: forward,
        step or whole trace; structural changes first, each row's spread and change), and A
        and B aligned by role in attention (µs per window on each side, B − A).
    """
    shown = guarded("diff", upload_worker.run_upload, "diff", trace_a, trace_b, label_a, label_b,
                    doing="diffing the traces")  # fmt: skip
    return shown.headline, shown.kernels, shown.operators, shown.roles


def diff_runs(run_a: str, run_b: str, traces: dict[str, str] | None) -> tuple[Any, ...]:
    """Diff two runs of this session's last Compare (paths from server-side state only)."""
    shown = guarded("diff_runs", views_diff.diff_runs_page, run_a, run_b, traces,
                    doing="diffing the runs")  # fmt: skip
    return shown.headline, shown.kernels, shown.operators, shown.roles


def fill_diff_picks(traces: dict[str, str] | None) -> tuple[Any, Any]:
    """After a Compare: its runs become the choices of the Diff tab's two dropdowns."""
    names, first, second = views_diff.diff_picks(traces)
    return gr.Dropdown(choices=names, value=first), gr.Dropdown(choices=names, value=second)


def _uploads() -> tuple[list[Any], gr.Button]:
    """Two trace uploads and their labels, in diff()'s order, and their button."""
    gr.Markdown("**Two uploaded traces** (`.json` / `.json.gz` from torch.profiler)")
    with gr.Row():
        file_a = gr.File(label="Trace A", file_types=[".json", ".gz"], elem_id="diff-file-a")
        file_b = gr.File(label="Trace B", file_types=[".json", ".gz"], elem_id="diff-file-b")
    with gr.Row():
        label_a = gr.Textbox("", label="Label A", placeholder="A", elem_id="label-a")
        label_b = gr.Textbox("", label="Label B", placeholder="B", elem_id="label-b")
    button = gr.Button("Diff uploads", variant="primary", elem_id="diff-button")
    return [file_a, file_b, label_a, label_b], button


def _results() -> tuple[list[Any], list[Any]]:
    """diff()'s outputs (the plain headline, hidden: it is what /diff returns, and the two delta
    tables) and what the page shows of them (the headline as Markdown, the line saying why the
    kernel table is hidden, and that table)."""
    headline_text = gr.Textbox(label="Headline", visible=False, elem_id="diff-headline-text")
    headline = gr.Markdown("", elem_id="diff-headline")
    no_kernels = gr.Markdown("", visible=False, elem_id="diff-no-kernels")
    kernels, operators = [
        table(label, elem_id, datatype=types, max_chars=80)
        for label, elem_id, types in DELTA_TABLES
    ]
    roles = table("By role (µs per window)", "diff-roles", max_chars=80)  # see title_roles
    return [headline_text, kernels, operators, roles], [headline, kernels, no_kernels]


def show_result(headline: str | None, kernels: Any) -> tuple[Any, Any, Any]:
    """The page's view of a Diff: the headline as Markdown; the kernel table hidden, with a line
    why, when neither trace has GPU work."""
    markdown, with_kernels, why = views_diff.result_view(headline, kernels)
    return markdown, gr.update(visible=with_kernels), gr.Markdown(why, visible=bool(why))


def title_roles(roles: Any) -> Any:
    """The role table says "in attention" only where the traces' kernels are attention's."""
    return gr.update(label=views_shared.roles_title(roles, "By role", "µs per window"))


def emptied() -> tuple[Any, ...]:
    """What a failed Diff leaves (the plain headline, the operator and role tables, then the
    page's view): nothing of the previous result, and the kernel table back in its place."""
    markdown, _, why = show_result(None, None)
    return None, None, None, markdown, gr.update(value=None, visible=True), why


def _follow(event: Any, outputs: list[Any], shown: list[Any]) -> None:
    """After a Diff: the page renders its result, or after a failure empties it all."""
    headline_text, kernels, operators, roles = outputs
    event.success(show_result, [headline_text, kernels], shown, **QUIET)
    event.success(title_roles, roles, roles, **QUIET)
    event.failure(emptied, None, [headline_text, operators, roles, *shown], **QUIET)


def build(compared: Any, compare_runs: gr.State) -> None:
    """The Diff tab, /diff, and the picks a Compare fills (`compared`, its event)."""
    with gr.Tab("Diff", id="diff"):
        gr.Markdown(
            "What changed between two runs, per kernel name and per operator, per window "
            "(per forward with `attn_fwd` spans, else per ProfilerStep, else the whole "
            "trace; the line under the headline says which): count and total µs of each "
            "side and the delta (B − A). Calls added, removed or made a different number of "
            "times come first (`change` = count); a change in time counts only beyond the "
            "row's `spread` (how far its time varies between windows, A's plus B's), and "
            "within it is marked `noise`."
        )
        with gr.Row(equal_height=False):
            with gr.Column(min_width=320):
                uploads, upload_button = _uploads()
            with gr.Column(min_width=320):
                gr.Markdown("**Or two runs of your last Compare**")
                with gr.Row():
                    pick_a = gr.Dropdown([], label="Run A", elem_id="pick-a")
                    pick_b = gr.Dropdown([], label="Run B", elem_id="pick-b")
                runs_button = gr.Button("Diff these runs", elem_id="diff-runs-button")
        outputs, shown = _results()
    compared.success(fill_diff_picks, compare_runs, [pick_a, pick_b], **QUIET)
    uploaded = upload_button.click(
        trace_job(diff), inputs=uploads, outputs=outputs, api_name="diff", **TRACE_JOB
    )
    _follow(uploaded, outputs, shown)
    picked = runs_button.click(
        trace_job(diff_runs),
        inputs=[pick_a, pick_b, compare_runs],
        outputs=outputs,
        api_visibility="private",
        **TRACE_JOB,
    )
    _follow(picked, outputs, shown)
