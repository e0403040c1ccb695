"""The Space: Gradio components wired to the profiling backend, and nothing else.

Data walks one way: raw inputs → RunConfig.from_user (validation) → profile_on_gpu (the one
GPU function: one profiled run) → ProfileResult → profiling.views → components. Errors a
user can act on become gr.Error with the backend's message; anything else is logged here
and shown as a generic gr.Error, never as a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr
import spaces  # before torch (imported by profiling/attention) touches CUDA: ZeroGPU patches it

from profiling import views
from profiling.config import ConfigError, RunConfig
from profiling.runner import ProfileResult, RunError, VariantUnavailable, run
from profiling.trace import TraceError

log = logging.getLogger("attention_profiler")
DEVICE = views.page_device()
START = views.defaults(DEVICE)
RANGES = views.slider_ranges(DEVICE)
USER_ERRORS = (ConfigError, VariantUnavailable, RunError, TraceError)
TITLES = {
    ConfigError: "Check the inputs",
    VariantUnavailable: "Variant unavailable",
    RunError: "The run failed",
    TraceError: "Unreadable trace",
}
CSS = """
.ap-banner { border-left: 4px solid #f59f00; background: rgba(245,159,0,0.10);
  padding: 6px 12px !important; border-radius: 6px; }
"""
# The strip's look travels with its component, so it holds however the demo is launched.
STRIP_CSS = """
.ap-strip { display: grid; grid-template-columns: repeat(auto-fit, minmax(128px, 1fr));
  gap: 8px; }
.ap-card { border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 8px 10px; background: var(--block-background-fill); }
.ap-label { font-size: 12px; color: var(--body-text-color-subdued); }
.ap-value { font-size: 18px; font-weight: 600; line-height: 1.3; overflow-wrap: anywhere; }
.ap-note { font-size: 11px; color: var(--body-text-color-subdued); line-height: 1.25; }
.ap-extra { font-size: 13px; margin-top: 8px; color: var(--body-text-color); }
.ap-empty { display: block; padding: 12px; color: var(--body-text-color-subdued);
  border: 1px dashed var(--border-color-primary); border-radius: 8px; }
"""
LAUNCH: dict[str, Any] = {"max_file_size": views.MAX_FILE_SIZE, "css": CSS}


def _user_error(exc: Exception) -> gr.Error:
    title = next((t for cls, t in TITLES.items() if isinstance(exc, cls)), "Error")
    return gr.Error(str(exc), title=title, print_exception=False)


def _gpu_seconds(config: RunConfig, progress: Any = None) -> int:
    return views.gpu_seconds(config)


@spaces.GPU(duration=_gpu_seconds)
def profile_on_gpu(config: RunConfig, progress: Any = None) -> ProfileResult:
    """The only GPU work: one profiled run. Returns plain data (paths, DataFrames, a Summary).

    On ZeroGPU this runs in a forked worker where only gr.Error reaches the user, so the
    backend's errors are translated here as well as in the handler.
    """
    report = (lambda fraction, text: progress(fraction, desc=text)) if progress else None
    try:
        return run(config, progress=report)
    except USER_ERRORS as exc:
        raise _user_error(exc) from None
    except Exception:
        log.exception("profile_on_gpu failed for %s", config)
        raise gr.Error(views.GENERIC_ERROR, print_exception=False) from None


RUN_DIRS = views.RunDirs()


def profile(
    variant: str,
    seq_len: float,
    dtype: str,
    batch: float,
    heads: float,
    head_dim: float,
    causal: bool,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
) -> tuple[Any, ...]:
    """Profile one attention variant with torch.profiler and return what ran.

    Args:
        variant: variant id, e.g. "naive", "sdpa-math", "sdpa-flash" (see the README).
        seq_len: sequence length S.
        dtype: "float32", "float16" or "bfloat16".
        batch: batch size B.
        heads: number of heads H.
        head_dim: head dimension D (a multiple of 8).
        causal: causal mask (true) or full attention (false).

    Returns:
        summary strip (HTML), summary (JSON), operator table, kernel table, kernel-table note,
        Gantt chart (plotly), trace .json, trace .json.gz, operator table .txt.
    """
    try:
        config = RunConfig.from_user(
            variant=variant, seq_len=seq_len, dtype=dtype, batch=batch, heads=heads,
            head_dim=head_dim, causal=causal,
        )  # fmt: skip
        views.check_budget(config, DEVICE)
    except ConfigError as exc:
        raise _user_error(exc) from None
    progress(0.0, desc="waiting for the GPU" if DEVICE == "cuda" else "starting")
    try:
        result = profile_on_gpu(config, progress)
        shown = views.page(result)
    except gr.Error:
        raise
    except USER_ERRORS as exc:
        raise _user_error(exc) from None
    except Exception:
        log.exception("profile failed for %s", config)
        raise gr.Error(views.GENERIC_ERROR, print_exception=False) from None
    RUN_DIRS.add(result.trace_json.parent)
    return (
        shown.strip,
        shown.summary,
        shown.operators,
        shown.kernels,
        shown.kernel_note,
        shown.figure,
        str(shown.files["json"]),
        str(shown.files["gz"]),
        str(shown.files["txt"]),
    )


def show_lesson(variant: str, dtype: str) -> str:
    """The chosen variant's lesson (and why it cannot run here)."""
    return views.lesson_markdown(variant, DEVICE, dtype)


def relabel_variants(variant: str, dtype: str) -> tuple[Any, str]:
    """Availability depends on the dtype: refresh the dropdown's labels and the lesson."""
    return (
        gr.Dropdown(choices=views.variant_choices(DEVICE, dtype), value=variant),
        views.lesson_markdown(variant, DEVICE, dtype),
    )


def _slider(name: str, label: str, info: str | None = None) -> gr.Slider:
    low, high, step = RANGES[name]
    return gr.Slider(
        low, high, value=START[name], step=step, label=label, info=info,
        elem_id=name, buttons=["reset"],
    )  # fmt: skip


with gr.Blocks(title="Attention Profiler", delete_cache=views.DELETE_CACHE) as demo:
    gr.Markdown(
        "# Attention Profiler\n"
        "Pick an attention implementation and a shape, click **Profile**, and see what really "
        "ran: torch.profiler's operator table, the kernels (names decoded), a Gantt chart of "
        "the exported trace, and the trace itself for [Perfetto](https://ui.perfetto.dev)."
    )
    banner = views.banner_markdown(DEVICE)
    gr.Markdown(banner, visible=bool(banner), elem_id="banner", elem_classes=["ap-banner"])
    with gr.Tab("Profile", id="profile"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=320):
                variant = gr.Dropdown(
                    choices=views.variant_choices(DEVICE, START["dtype"]),
                    value=START["variant"],
                    label="Variant",
                    elem_id="variant",
                    filterable=False,
                )
                lesson = gr.Markdown(
                    views.lesson_markdown(START["variant"], DEVICE, START["dtype"]),
                    elem_id="lesson",
                    container=True,
                    min_height=90,
                )
            with gr.Column(scale=3, min_width=320):
                seq_len = _slider("seq_len", "Sequence length S")
                with gr.Row():
                    dtype = gr.Radio(
                        ["bfloat16", "float16", "float32"], value=START["dtype"],
                        label="dtype", elem_id="dtype",
                    )  # fmt: skip
                    causal = gr.Checkbox(
                        value=START["causal"], label="Causal mask", elem_id="causal"
                    )
                with gr.Row():
                    batch = _slider("batch", "Batch B")
                    heads = _slider("heads", "Heads H")
                    head_dim = _slider("head_dim", "Head dim D", "a multiple of 8")
        run_button = gr.Button("Profile", variant="primary", elem_id="profile-button")

        strip = gr.HTML(views.placeholder_html(), elem_id="summary", css_template=STRIP_CSS)
        with gr.Row():
            json_file = gr.DownloadButton("Trace .json", elem_id="download-json", size="md")
            gz_file = gr.DownloadButton(
                "Trace .json.gz (Perfetto)", elem_id="download-gz", size="md"
            )
            txt_file = gr.DownloadButton("Operator table .txt", elem_id="download-txt", size="md")
        gantt = gr.Plot(label="Timeline: CPU ops and GPU kernels", elem_id="gantt")
        operators = gr.Dataframe(
            headers=views.operator_headers(DEVICE),
            datatype=views.operator_datatypes(DEVICE),
            label="Operators (torch.profiler key_averages)",
            elem_id="operators",
            interactive=False,
            wrap=True,
            max_height=420,
            show_search="search",
            column_widths=views.operator_widths(DEVICE),
            max_chars=90,  # key_averages lists kernels too; click a cell for the full name
            buttons=["copy", "fullscreen"],
        )
        kernel_info = gr.Markdown("", elem_id="kernel-note")
        kernels = gr.Dataframe(
            headers=views.kernel_headers(),
            datatype=views.kernel_datatypes(),
            label="GPU kernels per forward, names decoded",
            elem_id="kernels",
            interactive=False,
            wrap=True,
            max_height=420,
            column_widths=views.kernel_widths(),
            max_chars=100,
            visible=DEVICE == "cuda",  # a CPU run has no kernels: the note above says so
            show_search="search",
            buttons=["copy", "fullscreen"],
        )
        with gr.Accordion("Summary as JSON", open=False):
            summary = gr.JSON(label="summary", elem_id="summary-json")

    inputs = [variant, seq_len, dtype, batch, heads, head_dim, causal]
    outputs = [strip, summary, operators, kernels, kernel_info, gantt, json_file, gz_file, txt_file]
    run_button.click(
        profile,
        inputs=inputs,
        outputs=outputs,
        api_name="profile",
        concurrency_limit=1,
        concurrency_id=views.GPU_GROUP,
        trigger_mode="once",
    )
    variant.change(show_lesson, [variant, dtype], lesson, api_visibility="private", queue=False)
    dtype.change(
        relabel_variants, [variant, dtype], [variant, lesson], api_visibility="private",
        queue=False,
    )  # fmt: skip

demo.queue(max_size=views.QUEUE_MAX_SIZE)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    demo.launch(**LAUNCH)
