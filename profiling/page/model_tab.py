"""The Model tab (issue 43): a preset's decoder layers under each attn_implementation, and
/model, its API endpoint.

Raw inputs → ModelWorkload.from_user (every rule, one-line messages) → the run on the device
worker (profiling/run/model/runner.py) → profiling/views/model → components. Each
implementation is kept in the run store as a run (History lists, reopens and diffs it), and its
trace offered for download; the run's folder joins the newest few job folders kept. Under the
results, a Sweep over sequence lengths (profiling/page/model_sweep.py, /model_sweep).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
import spaces

from profiling.page import model_sweep
from profiling.page.controls import DEVICE, table
from profiling.page.errors import translated
from profiling.page.listeners import JOB_DIRS, device_click, progress_callback, show_waiting
from profiling.run.model.result import ModelRun
from profiling.run.model.runner import run as run_model
from profiling.store.hooks import keep, model_runs
from profiling.views.model import stored as views_stored
from profiling.views.model import table as views_table
from profiling.views.model import why
from profiling.views.model.files import trace_files
from profiling.workload.model.presets import PRESETS
from profiling.workload.model.spec import IMPLEMENTATIONS, MODES, ModelWorkload

GPU_SECONDS = 300
DEFAULTS: dict[str, dict[str, Any]] = {
    "cpu": {"preset": "tiny", "batch": 4, "seq_len": 64, "lengths": "64,48,32,8",
            "implementations": ["eager", "sdpa", "sdpa-math", "kernels"]},
    "cuda": {"preset": "llama-3.1-8b", "batch": 4, "seq_len": 4096,
             "lengths": "4096,3000,2048,512",
             "implementations": ["eager", "sdpa", "flex_attention", "kernels"]},
}  # fmt: skip


@spaces.GPU(duration=GPU_SECONDS)
def model_on_gpu(workload: ModelWorkload, progress: Any = None) -> ModelRun:
    """The GPU work: the model built once, each implementation run, its trace in a fresh
    `attnprof-model-` folder (the app's stale temp folders are swept: profiling.files)."""
    with translated("model_on_gpu"):
        return run_model(workload, None, progress_callback(progress))


def model(
    preset: str, layers: Any, dtype: str, batch: Any, seq_len: Any, lengths: Any, mode: str,
    new_tokens: Any, implementations: Any,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
) -> tuple[Any, ...]:  # fmt: skip
    """Profile attention inside a transformers model (random weights, nothing downloaded) under
    each attn_implementation.

    Args:
        preset: tiny, tiny-gemma-2, llama-3.1-8b, qwen2.5-7b, mistral-7b or gemma-2-9b.
        layers: decoder layers to build (1 to the model's own; the memory estimate bounds it).
        dtype: float32, float16 or bfloat16.
        batch: sequences in the batch.
        seq_len: the padded length of every sequence.
        lengths: each sequence's real tokens, comma-separated ("" for all seq_len).
        mode: prefill, decode (new tokens against the KV cache) or train.
        new_tokens: decode only: tokens generated, one a step.
        implementations: eager, sdpa, sdpa-math, sdpa-efficient, sdpa-flash, sdpa-cudnn,
            flex_attention, kernels.

    Returns:
        the verdict (and the runs kept in History), the "which attn_implementation?" table, µs
        by category, attention per decoder layer, SDPA's reasons and what ran, the Gantt of one
        implementation's step, and each implementation's trace (.json.gz, one per
        implementation that ran).
    """
    with translated("model_request"):
        workload = ModelWorkload.from_user(
            preset=preset, layers=layers, dtype=dtype, batch=batch, seq_len=seq_len,
            lengths=lengths, mode=mode, new_tokens=new_tokens,
            implementations=implementations, device=DEVICE,
        )  # fmt: skip
    show_waiting(progress)
    result = model_on_gpu(workload, progress)
    JOB_DIRS.add(Path(result.out_dir))  # the newest few runs' traces stay to be downloaded
    kept = keep(model_runs(result, "app"))
    shown = next((item for item in result.runs if item.ok and item.sdpa), None)
    shown = shown or next((item for item in result.runs if item.ok), None)
    names = [item.id for item in result.runs]
    return (
        views_table.verdict(result) + views_stored.kept_markdown(kept.ids, names, kept.notes),
        views_table.comparison(result),
        views_table.categories(result),
        views_table.layers(result),
        f"```text\n{why.text(result)}\n```",
        shown.gantt if shown is not None else None,
        trace_files(result) or None,
    )


def _controls() -> list[Any]:
    start = DEFAULTS[DEVICE]
    with gr.Row():
        preset = gr.Dropdown(
            list(PRESETS), value=start["preset"], label="Preset", elem_id="mo-preset"
        )
        layers = gr.Number(2, precision=0, label="Decoder layers", elem_id="mo-layers")
        dtype = gr.Dropdown(["bfloat16", "float16", "float32"], value="float32" if DEVICE == "cpu"
                            else "bfloat16", label="dtype", elem_id="mo-dtype")  # fmt: skip
        batch = gr.Number(start["batch"], precision=0, label="Batch", elem_id="mo-batch")
        seq_len = gr.Number(
            start["seq_len"], precision=0, label="Sequence length", elem_id="mo-seq-len"
        )
    with gr.Row():
        lengths = gr.Textbox(start["lengths"], label="Each sequence's length (ragged batch)",
                             info="comma-separated, one per sequence; empty: all full",
                             elem_id="mo-lengths")  # fmt: skip
        mode = gr.Radio(list(MODES), value="prefill", label="Mode", elem_id="mo-mode")
        new_tokens = gr.Number(8, precision=0, label="Decode: new tokens", elem_id="mo-new-tokens")
    implementations = gr.CheckboxGroup(
        list(IMPLEMENTATIONS), value=start["implementations"], label="attn_implementation",
        elem_id="mo-attn",
    )  # fmt: skip
    return [preset, layers, dtype, batch, seq_len, lengths, mode, new_tokens, implementations]


def build() -> None:
    """The Model tab and /model."""
    with gr.Tab("Model", id="model"):
        gr.Markdown(
            "Attention inside a real transformers model: a preset's decoder layers (random "
            "weights, nothing downloaded) under each `attn_implementation`, on a ragged batch "
            "if you give each sequence's length. Which one is fastest for your model, what its "
            "attention ran and why, and what share of the step attention is."
        )
        inputs = _controls()
        button = gr.Button("Profile the model", variant="primary", elem_id="model-button")
        verdict = gr.Markdown(label="Which is fastest", elem_id="mo-verdict")
        compared = table("Which attn_implementation?", "mo-table", max_chars=160)
        categories = table("The step, µs by category (they add up to the step)", "mo-categories")
        layers = table("Attention per decoder layer", "mo-layers-table")
        reasons = gr.Markdown(label="What ran, and why", elem_id="mo-why")
        gantt = gr.Plot(label="Timeline of one step: a span per decoder layer", elem_id="mo-gantt")
        traces = gr.File(label="Each implementation's trace (.json.gz, Perfetto)",
                         file_count="multiple", interactive=False, elem_id="mo-traces")  # fmt: skip
        outputs = [verdict, compared, categories, layers, reasons, gantt, traces]
        swept = model_sweep.build(inputs)
    device_click(button, model, "model", inputs=inputs, outputs=outputs, cleared=outputs,
                 said={}, downloads=[])  # fmt: skip
    model_sweep.listen(*swept)
