"""The Profile tab: one variant at one shape, profiled on the device, and what really ran.

Raw inputs → workload.page_workload (fields, page ranges) → profile_on_gpu (the GPU function
of a run) → plain results → profiling.views.profile → components.
"""

from __future__ import annotations

from typing import Any

import gradio as gr
import spaces

from attention import VARIANTS
from profiling.page.controls import (
    DEVICE,
    START,
    beside_shape,
    kernel_table,
    read_shape,
    roofline_table,
    shape_handler,
    table,
)
from profiling.page.errors import translated
from profiling.page.listeners import (
    QUIET,
    device_click,
    download_button,
    progress_callback,
    show_waiting,
)
from profiling.page.style import STRIP_CSS
from profiling.run import sdpa_account
from profiling.run.runner import ProfileResult, run
from profiling.store.hooks import keep, profile_run
from profiling.views import history as views_history
from profiling.views import profile as views_profile
from profiling.views import shared as views_shared
from profiling.workload import request as job_request
from profiling.workload.controls import SHAPE_ORDER
from profiling.workload.spec import Workload, page_workload

# ZeroGPU lends the GPU to a run only: SDPA's checks, which need the GPU's tensors, wait for one
ZERO_GPU = bool(getattr(getattr(spaces, "config", None), "Config", None) and
                getattr(spaces.config.Config, "zero_gpu", False))  # fmt: skip

RUN_DIRS = views_shared.RunDirs()


def _gpu_seconds(workload: Workload, progress: Any = None) -> int:
    return job_request.gpu_seconds(workload)


@spaces.GPU(duration=_gpu_seconds)
def profile_on_gpu(workload: Workload, progress: Any = None) -> ProfileResult:
    """The only GPU work: one profiled run. Returns plain data (paths, DataFrames, a Summary)."""
    with translated(f"profile_on_gpu for {workload}"):
        return run(workload, progress=progress_callback(progress))


@shape_handler(
    {"variant": (str, 'variant id, e.g. "naive", "sdpa-math", "sdpa-flash" (see the README).')},
    "Profile one attention variant with torch.profiler and return what ran.",
    """summary strip (HTML), summary (JSON), operator table, kernel table, kernel-table note,
Gantt chart (plotly), trace .json, trace .json.gz, operator table .txt, the kernels'
µs per step by role in attention, the roofline chart (plotly) and the per-kernel
roofline table (FLOP, bytes and their source, TFLOP/s, TB/s, FLOP/byte, bound).""",
    options=("counters",),
)
def profile(variant: str, shape: dict[str, Any], progress: gr.Progress) -> tuple[Any, ...]:
    with translated("profile's checks"):
        workload = page_workload(DEVICE, variant=variant, **shape)
    show_waiting(progress)
    with translated(f"profile for {workload}"):
        result = profile_on_gpu(workload, progress)
        RUN_DIRS.add(result.trace_json.parent)  # kept in the count even if its page fails
        shown = views_profile.page(result)
    roles, roofline = shown.summary.get("roles"), shown.summary.get("roofline")
    views_history.mark_kept(shown, keep([profile_run(result, "app", roles, roofline)]))
    return _outputs(shown)


def _outputs(shown: views_profile.Page) -> tuple[Any, ...]:
    """A run's page in the order of profile()'s outputs (the memory state between the Gantt
    and the files is page-only: a gr.State is not among the API's outputs)."""
    return (
        shown.strip,
        shown.summary,
        shown.operators,
        shown.kernels,
        shown.kernel_note,
        shown.figure,
        _memory_state(shown),
        str(shown.files["json"]),
        str(shown.files["gz"]),
        str(shown.files["txt"]),
        shown.roles,
        shown.roofline_figure,
        shown.roofline,
    )


def sdpa_checks(variant: str, *shape: Any) -> str:
    """Under an SDPA variant: torch's own checks of each backend at the shape on screen
    (`shape`: the controls' values, in SHAPE_ORDER), and its pick; empty for other
    variants, or a shape the Profile button would refuse."""
    if ZERO_GPU:
        picked = VARIANTS.get(variant)
        return views_profile.ZERO_GPU_CHECKS if picked and picked.ran_from_trace else ""
    values = read_shape(dict(zip(SHAPE_ORDER, shape, strict=False)))
    account = sdpa_account.page_account(DEVICE, variant, values)
    return views_profile.sdpa_checks_markdown(account, DEVICE)


def _memory_state(shown: views_profile.Page) -> dict[str, Any]:
    """What the page-only follow-up shows (a gr.State: the API's outputs stay the nine above;
    API callers read the memory figures and clocks in the summary JSON)."""
    files = {name: str(shown.files[name]) if shown.files.get(name) else None
             for name in ("memory", "run")}  # fmt: skip
    return {"note": shown.memory_note, "figure": shown.memory_figure,
            "table": shown.memory_table, **files}  # fmt: skip


def show_memory(state: dict[str, Any] | None) -> tuple[Any, ...]:
    """The memory timeline, its breakdown and the two downloads from a run's state."""
    state = state or {}
    files = [
        gr.DownloadButton(value=state.get(name), interactive=bool(state.get(name)))
        for name in ("memory", "run")
    ]
    return (state.get("note", ""), state.get("figure"), state.get("table"), *files)


def show_lesson(variant: str, dtype: str, causal: bool = True, mode: str = "forward") -> str:
    """The chosen variant's lesson (and why it cannot run here)."""
    return views_profile.lesson_markdown(variant, DEVICE, dtype, causal, mode)


def relabel_variants(
    variant: str, dtype: str, causal: bool = True, mode: str = "forward"
) -> tuple[Any, str]:
    """Availability depends on the dtype and the mode: refresh the labels and the lesson."""
    return (
        gr.Dropdown(choices=views_profile.variant_choices(DEVICE, dtype, mode), value=variant),
        views_profile.lesson_markdown(variant, DEVICE, dtype, causal, mode),
    )


def _variant_column() -> tuple[gr.Dropdown, gr.Markdown, gr.Column]:
    """The variant dropdown, under it the chosen variant's lesson, and under that a column
    for SDPA's checks (filled once the shape controls exist)."""
    variant = gr.Dropdown(
        choices=views_profile.variant_choices(DEVICE, START["dtype"]),
        value=START["variant"],
        label="Variant",
        elem_id="variant",
        filterable=False,
    )
    lesson = gr.Markdown(
        views_profile.lesson_markdown(START["variant"], DEVICE, START["dtype"], START["causal"]),
        elem_id="lesson",
        container=True,
        min_height=90,
    )
    return variant, lesson, gr.Column()


def _checks(variant: gr.Dropdown, shape: dict[str, Any]) -> gr.Markdown:
    """Under the lesson: an SDPA variant's own checks at the shape on screen."""
    first = sdpa_checks(variant.value, *(control.value for control in shape.values()))
    return gr.Markdown(first, elem_id="sdpa-checks")


def _results() -> list[Any]:
    """What a run shows, in the order of profile()'s outputs (laid out in the page's order)."""
    strip = gr.HTML(views_profile.placeholder_html(), label="Summary strip", elem_id="summary",
                    css_template=STRIP_CSS)  # fmt: skip
    with gr.Row():  # disabled until a run: the strip above says so
        json_file = download_button("Trace .json", "download-json")
        gz_file = download_button("Trace .json.gz (Perfetto)", "download-gz")
        txt_file = download_button("Operator table .txt", "download-txt")
    gantt = gr.Plot(label="Timeline: CPU ops and GPU kernels", elem_id="gantt")
    operators = table(
        "Operators (torch.profiler key_averages)",
        "operators",
        views_profile.operator_layout(DEVICE),
        max_chars=90,  # key_averages lists kernels too; click a cell for the full name
    )
    kernel_note = gr.Markdown(
        "", label="Kernel table note", show_label=False, elem_id="kernel-note"
    )
    kernels = kernel_table(
        "GPU kernels per forward, names decoded",
        "kernels",
        visible=DEVICE == "cuda",  # a CPU run has no kernels: the note above says so
    )
    roles = table(
        "Kernels by role in attention (µs per step)",
        "roles",
        visible=DEVICE == "cuda",  # from the kernels: a CPU run has none
    )
    roofline_plot = gr.Plot(label="Roofline: each kernel", elem_id="roofline",
                            visible=DEVICE == "cuda")  # fmt: skip
    roofline = roofline_table("Roofline per kernel", "roofline-table", visible=DEVICE == "cuda")
    with gr.Accordion("Summary as JSON", open=False):
        summary = gr.JSON(label="summary", elem_id="summary-json")
    return [strip, summary, operators, kernels, kernel_note, gantt, json_file, gz_file, txt_file,
            roles, roofline_plot, roofline]  # fmt: skip


def _memory_results() -> list[Any]:
    """The memory timeline, its breakdown and the files (issue 23), in show_memory's order."""
    note = gr.Markdown("", elem_id="memory-note")
    plot = gr.Plot(
        label="Memory over one step", elem_id="memory-timeline", visible=DEVICE == "cuda"
    )
    breakdown = table("Memory at the peak, by what it is", "memory-table",
                      visible=DEVICE == "cuda")  # fmt: skip
    with gr.Row():
        snapshot = download_button("Memory snapshot .pickle (memory_viz)", "download-memory")
        run_json = download_button("Run figures .json (spread, clocks)", "download-run")
    return [note, plot, breakdown, snapshot, run_json]


def build() -> None:
    """The Profile tab and its listeners: /profile, and the lesson that follows the picks."""
    with gr.Tab("Profile", id="profile"):
        (variant, lesson, checks_column), shape = beside_shape(_variant_column, "", counters=True)
        with checks_column:  # under the lesson, made once the shape controls exist
            checks = _checks(variant, shape)
        run_button = gr.Button("Profile", variant="primary", elem_id="profile-button")
        outputs = _results()
        memory = _memory_results()
        memory_state = gr.State(None)
    profiled = device_click(
        run_button,
        profile,
        "profile",
        inputs=[variant, *shape.values()],
        outputs=[*outputs[:6], memory_state, *outputs[6:]],
        cleared=[*outputs, *memory],
        said={outputs[0]: views_profile.failed_html()},
        downloads=outputs[6:9],  # the three files
    )
    for control in (variant, *shape.values()):  # raw values: a typed -3 is no traceback
        control.change(sdpa_checks, [variant, *shape.values()], checks, preprocess=False,
                       **QUIET)  # fmt: skip
    profiled.success(show_memory, memory_state, memory, **QUIET)
    lesson_inputs = [variant, shape["dtype"], shape["causal"], shape["mode"]]
    for control in (variant, shape["causal"]):
        control.change(show_lesson, lesson_inputs, lesson, **QUIET)
    for control in (shape["dtype"], shape["mode"]):
        control.change(relabel_variants, lesson_inputs, [variant, lesson], **QUIET)
