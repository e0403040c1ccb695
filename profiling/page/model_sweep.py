"""The Model tab's Sweep (issue 43): the model's implementations over sequence lengths, full
batches, one model run per length in one device job, as one log–log chart, the table of points
and a zip of their traces (as the Sweep tab's); /model_sweep, its API endpoint.

Raw inputs → profiling.jobs.model_sweep.sweep_request (the lengths read loosely and each point
validated before the first run) → the runs on the device worker → each (length,
implementation) kept in the run store → profiling.views.model.sweep → components.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import gradio as gr
import spaces

from profiling.jobs.model_sweep import MAX_POINTS, SweepPoint, sweep_points, sweep_request
from profiling.page.controls import DEVICE, table
from profiling.page.errors import translated
from profiling.page.listeners import (
    JOB_DIRS,
    device_click,
    download_button,
    progress_callback,
    show_waiting,
)
from profiling.store.hooks import keep, model_sweep_runs
from profiling.views.model import sweep as views_sweep
from profiling.workload.model.spec import ModelWorkload
from profiling.workload.request import GPU_SECONDS_JOB_MAX

LENGTHS = {"cpu": [16, 32, 64, 128, 256], "cuda": [512, 1024, 2048, 4096, 8192, 16384]}
DEFAULT_LENGTHS = {"cpu": [16, 32, 64], "cuda": [1024, 2048, 4096]}
BEFORE_RUN = (
    "The model above (its preset, layers, dtype, batch, mode and implementations) over the "
    "lengths picked here, full batches (each sequence's length does not apply). The zip is "
    "offered once a sweep has run."
)


@spaces.GPU(duration=GPU_SECONDS_JOB_MAX)
def model_sweep_on_gpu(
    workloads: list[ModelWorkload], folder: str, progress: Any = None
) -> list[SweepPoint]:
    """The GPU work: one model run per length, one after another, in `folder`."""
    with translated("model_sweep_on_gpu"):
        return sweep_points(workloads, Path(folder), progress_callback(progress))


def model_sweep(
    preset: str, layers: Any, dtype: str, batch: Any, seq_lens: Any, mode: str,
    new_tokens: Any, implementations: Any,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
) -> tuple[Any, ...]:  # fmt: skip
    """Profile a model's implementations over sequence lengths (full batches), one model run
    per length; a length the memory estimate or the CPU budget refuses is kept as a point.

    Args:
        preset: tiny, tiny-gemma-2, llama-3.1-8b, qwen2.5-7b, mistral-7b or gemma-2-9b.
        layers: decoder layers to build (1 to the model's own).
        dtype: float32, float16 or bfloat16.
        batch: sequences in the batch.
        seq_lens: the sequence lengths, e.g. [32, 64, 128] (at most 8).
        mode: prefill, decode (new tokens against the KV cache) or train.
        new_tokens: decode only: tokens generated, one a step.
        implementations: eager, sdpa, sdpa-math, sdpa-efficient, sdpa-flash, sdpa-cudnn,
            flex_attention, kernels.

    Returns:
        the log–log chart of the step and its attention vs S per implementation, the table
        of points (a refused one with its reason), a zip with every point's traces.
    """
    with translated("model_sweep_request"):
        workloads = sweep_request(
            seq_lens, preset=preset, layers=layers, dtype=dtype, batch=batch, mode=mode,
            new_tokens=new_tokens, implementations=implementations, device=DEVICE,
        )  # fmt: skip
    show_waiting(progress)
    folder = tempfile.mkdtemp(prefix="attnprof-model-sweep-")
    JOB_DIRS.add(Path(folder))  # the newest few jobs' traces stay; a failed one's go in time
    points = model_sweep_on_gpu(workloads, folder, progress)
    keep(model_sweep_runs(points, "app"))
    with translated("model_sweep views"):
        shown = views_sweep.sweep_page(points)
    if shown.zip_path is not None:
        JOB_DIRS.add(shown.zip_path.parent)
    return shown.figure, shown.table, str(shown.zip_path) if shown.zip_path else None


def build(model_inputs: list[Any]) -> tuple[Any, ...]:
    """The Sweep's part of the Model tab (under its results): what listen() wires."""
    with gr.Accordion("Sweep over sequence length", open=False, elem_id="mo-sweep"):
        note = gr.Markdown(BEFORE_RUN, elem_id="mo-sw-note")
        lengths = gr.CheckboxGroup(
            LENGTHS[DEVICE], value=DEFAULT_LENGTHS[DEVICE], label="Sequence lengths S",
            info=f"at most {MAX_POINTS}", elem_id="mo-sw-lengths",
        )  # fmt: skip
        button = gr.Button("Sweep the model", variant="primary", elem_id="mo-sweep-button")
        chart = gr.Plot(label="The step and its attention vs S (log–log)", elem_id="mo-sw-chart")
        points = table("Points: each length and implementation", "mo-sw-table", max_chars=160)
        zip_file = download_button("Every trace and the table (.zip)", "mo-sw-zip")
    preset, layers, dtype, batch, _seq_len, _lengths, mode, new_tokens, picked = model_inputs
    inputs = [preset, layers, dtype, batch, lengths, mode, new_tokens, picked]
    return button, inputs, [chart, points, zip_file], note


def listen(button: gr.Button, inputs: list[Any], outputs: list[Any], note: Any) -> None:
    """The Sweep's button as /model_sweep (after /model: the API's order stays)."""
    device_click(button, model_sweep, "model_sweep", inputs=inputs, outputs=outputs,
                 cleared=[*outputs, note], said={note: BEFORE_RUN}, downloads=outputs[-1:],
                 note=note)  # fmt: skip
