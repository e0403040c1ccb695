"""The Compare tab: several variants at one shape, profiled one after another in one GPU job.

Raw inputs → job_request.compare_request → compare_on_gpu → CompareResult →
views_compare.compare_page → components. The runs' traces stay in the session's state, for the
Diff tab.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr
import spaces

from profiling.jobs.compare import CompareResult
from profiling.jobs.compare import compare_workloads as run_compare
from profiling.page.controls import (
    DEVICE,
    beside_shape,
    shape_handler,
    table,
    variant_picker,
)
from profiling.page.errors import translated
from profiling.page.listeners import (
    QUIET,
    device_click,
    download_button,
    job_options,
    job_seconds,
    relabel_on_dtype,
    run_device_job,
)
from profiling.store.hooks import compare_runs, keep
from profiling.views import compare as views_compare
from profiling.views import shared as views_shared
from profiling.views import timing as views_timing
from profiling.workload import request as job_request

MAX_VARIANTS = job_request.MAX_COMPARE_VARIANTS[DEVICE]
BEFORE_RUN = views_shared.before_run_note("Compare", "the table, the charts and the zip")


@spaces.GPU(duration=job_seconds)
def compare_on_gpu(request: job_request.JobRequest, progress: Any = None) -> CompareResult:
    """The GPU work of a Compare: every variant profiled one after another, plain data back."""
    with translated("compare_on_gpu"):
        return run_compare(request.workloads, job_options(progress))


@shape_handler(
    {
        "variants": (
            list[str],
            'variant ids, e.g. ["naive", "naive-inplace", "sdpa-flash"]; unavailable ones are '
            "listed with the reason.",
        )
    },
    "Profile several variants at one shape, one after another, as the post's table.",
    """the "at a glance" table, a note naming the datasheet peak used, GPU-vs-CPU bar chart,
stacked mini-Gantts, a zip of every trace and table (and each run's figures .json and memory
snapshot), the variants × roles table (µs per step) and every variant's attention kernels on
one roofline (plotly).""",
    " per variant",
    options=("counters",),
)
def compare(variants: list[str], shape: dict[str, Any], progress: gr.Progress) -> tuple[Any, ...]:
    validate = partial(job_request.compare_request, variants, **shape, device=DEVICE)
    shown, timing = run_device_job("compare", validate, compare_on_gpu, _view, progress)
    zip_path = str(shown.zip_path) if shown.zip_path else None
    # issue 23's timing table and memory peaks travel in a gr.State (not an API output)
    return (shown.glance, shown.note, shown.bars, shown.gantts, timing, zip_path, shown.roles,
            shown.roofline, shown.traces)  # fmt: skip


def _view(result: CompareResult, device: str) -> tuple[Any, Any]:
    """The Compare page, and issue 23's timing table and memory peaks beside it; each row is
    kept in the run store first (issue 34)."""
    keep(compare_runs(result, "app"))
    return views_compare.compare_page(result, device), views_timing.compare_timing(result.runs)


def _picks() -> gr.Dropdown:
    """The variants, preselected as compare_defaults says, at most MAX_VARIANTS."""
    return variant_picker(
        "cmp-variants",
        views_compare.compare_defaults,
        MAX_VARIANTS,
        info=f"at most {MAX_VARIANTS}; preselected: those of the post's six "
        "(and the Hub kernels) that can run here",
    )


def _results() -> tuple[list[Any], gr.Markdown]:
    """What a Compare shows, in the order of compare()'s outputs (laid out in the page's), and
    the page-only line that stands in for an empty role table."""
    note = gr.Markdown(
        BEFORE_RUN, label="Note", show_label=False, elem_id="cmp-note"
    )  # says why the zip is disabled
    glance = table(
        "At a glance (per forward; per step of a train step)",
        "glance",
        views_compare.glance_layout(DEVICE),
        max_chars=120,
        max_height=640,
    )
    zip_file = download_button("Every trace and table (.zip)", "cmp-zip")
    bars = gr.Plot(label="GPU vs CPU time", elem_id="cmp-bars")
    gantts = gr.Plot(label="Timelines on one time axis", elem_id="cmp-gantts")
    with gr.Accordion("Datasheet peaks (what “% of peak” divides by)", open=False):
        table(
            "NVIDIA datasheet dense peaks, TFLOP/s",
            "peaks",
            value=views_compare.peaks_view(),
            max_chars=140,
        )
    roles = table("Kernels by role: µs per step, variant by variant", "cmp-roles", max_height=360)
    roles_note = gr.Markdown("", elem_id="cmp-roles-note")  # page only: why there is no table
    roofline = gr.Plot(label="Every variant's attention kernels on one roofline",
                       elem_id="cmp-roofline")  # fmt: skip
    return [glance, note, bars, gantts, zip_file, roles, roofline], roles_note


def _timing_results() -> list[Any]:
    """Issue 23: the timing table and the memory peaks (a page-only follow-up fills them)."""
    timing = table("Timing, clocks and memory per variant", "cmp-timing", max_height=420,
                   column_widths=views_timing.timing_widths())  # fmt: skip
    peaks = gr.Plot(label="Memory at each variant's peak, by what it is", elem_id="cmp-peaks")
    return [timing, peaks]


def fit_glance(glance: Any) -> Any:
    """The glance table's widths for the columns it shows (a training run adds eight)."""
    columns = [str(c) for c in getattr(glance, "columns", [])]
    widths = views_compare.glance_widths(DEVICE, columns or None)
    shown = columns or views_compare.glance_columns(DEVICE)
    return gr.update(column_widths=views_shared.fit_header_widths(shown, widths))


def show_roles(roles: Any) -> tuple[Any, str]:
    """The role table where it has roles; where none ran a kernel, a line that says so."""
    why = views_compare.no_roles_note(roles)
    return gr.update(visible=not why), why


def show_timing(shown: tuple[Any, Any] | None) -> tuple[Any, Any]:
    return shown if shown else (None, None)


def build() -> tuple[Any, gr.State]:
    """The Compare tab and /compare. Returns the Compare event and the session's runs
    (variant → trace, server side), which the Diff tab offers."""
    with gr.Tab("Compare", id="compare"):
        gr.Markdown(
            "Several variants at one shape, profiled one after another in one GPU job: "
            "the post's *at a glance* table, GPU vs CPU time per forward, and every timeline "
            "on one time axis. Variants that cannot run here are listed with the reason."
        )
        variants, shape = beside_shape(_picks, "cmp-", counters=True)
        button = gr.Button("Compare", variant="primary", elem_id="compare-button")
        outputs, roles_note = _results()
        timing = _timing_results()
        runs, timing_state = gr.State({}), gr.State(None)
    compared = device_click(
        button,
        compare,
        "compare",
        inputs=[variants, *shape.values()],
        outputs=[*outputs[:4], timing_state, *outputs[4:], runs],
        cleared=[*outputs, *timing, roles_note],
        said={outputs[1]: views_shared.failed_note("Compare")},
        downloads=outputs[4:5],  # the zip
    )
    compared.success(show_timing, timing_state, timing, **QUIET)
    compared.success(show_roles, outputs[5], [outputs[5], roles_note], **QUIET)
    compared.success(fit_glance, outputs[0], outputs[0], **QUIET)
    relabel_on_dtype(variants, shape["dtype"])
    return compared, runs
