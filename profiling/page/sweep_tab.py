"""The Sweep tab: variants over sequence lengths, in one GPU job, as two log–log charts.

Raw inputs → job_request.sweep_request → sweep_on_gpu → SweepResult →
views_sweep.sweep_page → components. Refused, unavailable and out-of-memory points are marked,
never dropped.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr
import spaces

from profiling.jobs.sweep import SweepResult
from profiling.jobs.sweep import sweep_workloads as run_sweep
from profiling.page.controls import (
    DEVICE,
    beside_shape,
    shape_handler,
    table,
    variant_picker,
)
from profiling.page.errors import translated
from profiling.page.listeners import (
    device_click,
    download_button,
    job_options,
    job_seconds,
    relabel_on_dtype,
    run_device_job,
)
from profiling.store.hooks import keep, sweep_runs
from profiling.views import shared as views_shared
from profiling.views import sweep as views_sweep
from profiling.workload import request as job_request

BEFORE_RUN = views_shared.before_run_note("Sweep", "the charts, the points and the zip")


@spaces.GPU(duration=job_seconds)
def sweep_on_gpu(request: job_request.JobRequest, progress: Any = None) -> SweepResult:
    """The GPU work of a Sweep: every (variant, seq_len) point, one after another."""
    with translated("sweep_on_gpu"):
        return run_sweep(request.workloads, job_options(progress), job_request.point_check(DEVICE))


@shape_handler(
    {
        "variants": (list[str], 'variant ids, e.g. ["naive", "sdpa-flash"].'),
        "seq_lens": (list[int], "sequence lengths, e.g. [256, 512, 1024]."),
    },
    "Profile variants over sequence lengths; refused, unavailable and OOM points are marked.",
    """log–log chart of time per forward vs S, log–log chart of memory vs S, the table of
points (with status and reason), a zip with one trace per point.""",
    " per point",
)
def sweep(
    variants: list[str], seq_lens: list[int], shape: dict[str, Any], progress: gr.Progress
) -> tuple[Any, ...]:
    validate = partial(job_request.sweep_request, variants, seq_lens, **shape, device=DEVICE)
    shown = run_device_job("sweep", validate, sweep_on_gpu, _view, progress)
    zip_path = str(shown.zip_path) if shown.zip_path else None
    return shown.time, shown.memory, shown.table, zip_path


def _view(result: SweepResult, device: str) -> views_sweep.SweepPage:
    """The Sweep page; each point is kept in the run store first (issue 34)."""
    keep(sweep_runs(result, "app"))
    return views_sweep.sweep_page(result, device)


def _picks() -> tuple[gr.Dropdown, gr.CheckboxGroup]:
    """The variants and the sequence lengths, bounded by the points a sweep may hold."""
    variants = variant_picker(
        "sw-variants",
        views_sweep.sweep_defaults,
        job_request.MAX_SWEEP_VARIANTS[DEVICE],
    )
    lengths = gr.CheckboxGroup(
        job_request.sweep_lengths(DEVICE),
        value=views_sweep.sweep_default_lengths(DEVICE),
        label="Sequence lengths S",
        info=f"at most {job_request.MAX_SWEEP_POINTS[DEVICE]} points (variants × lengths)",
        elem_id="sw-lengths",
    )
    return variants, lengths


def _results() -> list[Any]:
    """The two charts, the points and the zip, in the order of sweep()'s outputs."""
    time_chart = gr.Plot(label="Time per forward vs S (log–log)", elem_id="sw-time")
    memory_chart = gr.Plot(label="Memory vs S (log–log)", elem_id="sw-memory")
    points = table("Points", "sw-table", views_sweep.sweep_layout(DEVICE))
    zip_file = download_button("Every trace and the table (.zip)", "sw-zip")
    return [time_chart, memory_chart, points, zip_file]


def build() -> None:
    """The Sweep tab and /sweep."""
    with gr.Tab("Sweep", id="sweep"):
        gr.Markdown(
            "Variants over sequence lengths, to see where the quadratic cost bites. Points the "
            "memory estimate or the CPU budget refuses, and out-of-memory runs, are marked on "
            "the charts and listed in the table, never dropped."
        )
        (variants, lengths), shape = beside_shape(_picks, "sw-", seq_len=False)
        button = gr.Button("Sweep", variant="primary", elem_id="sweep-button")
        note = gr.Markdown(BEFORE_RUN, elem_id="sw-note")  # page only: why the zip is disabled
        outputs = _results()
    device_click(
        button,
        sweep,
        "sweep",
        inputs=[variants, lengths, *shape.values()],
        outputs=outputs,
        cleared=[*outputs, note],
        said={note: views_shared.failed_note("Sweep")},
        downloads=outputs[-1:],  # the zip
        note=note,
    )
    relabel_on_dtype(variants, shape["dtype"])
