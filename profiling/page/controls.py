"""The page's device, its starting values, and the components several tabs build alike.

The page is built once per process for the device it finds; the shape controls of Profile,
Compare and Sweep share the Profile tab's ranges, so a value one tab accepts the others accept.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr

from profiling.analysis.columns import ROOFLINE_COLUMNS
from profiling.run import counters as collect
from profiling.views import profile as views_profile
from profiling.views import shared as views_shared
from profiling.workload.spec import device_key, page_ranges, resolve_device

DEVICE = resolve_device()
START = views_shared.defaults(DEVICE)
RANGES = page_ranges(DEVICE)
DTYPES = ["bfloat16", "float16", "float32"]
# the handlers' order (mode last: API calls made before it existed keep their meaning)
SHAPE_ORDER = [
    "seq_len", "dtype", "batch", "heads", "head_dim", "causal", "mode", "kv_heads", "q_len",
    "window", "timing", "steps",
]  # fmt: skip
PRESETS = views_shared.PRESETS[device_key(DEVICE)]
PRESET_FIELDS = ["seq_len", "batch", "heads", "head_dim", "kv_heads", "q_len", "window"]
TIMINGS = [
    ("eager", "eager"),
    ("CUDA graph (no CPU launch cost)", "cuda-graph"),
    ("cold L2 (flushed before each step)", "cold-l2"),
]
MODES = [
    ("forward", "forward"),
    ("backward (measured alone)", "backward"),
    ("train step (forward + backward)", "train"),
]


def slider(name: str, label: str, info: str | None = None, prefix: str = "") -> gr.Slider:
    """A shape slider over the page's range for `name`, starting at the page's default."""
    low, high, step = RANGES[name]
    return gr.Slider(
        low,
        high,
        value=START[name],
        step=step,
        label=label,
        info=info,
        elem_id=prefix + name,
        buttons=["reset"],
    )


def shape_controls(prefix: str, seq_len: bool = True, counters: bool = False) -> dict[str, Any]:
    """seq_len (optional), dtype, batch, heads, head_dim, causal, mode (and, for Profile and
    Compare, the counters box): laid out as on the Profile tab, in the handlers' order."""
    controls: dict[str, Any] = {}
    if seq_len:
        controls["seq_len"] = slider("seq_len", "Sequence length S", prefix=prefix)
    with gr.Row():
        controls["dtype"] = gr.Radio(
            DTYPES, value=START["dtype"], label="dtype", elem_id=prefix + "dtype"
        )
        controls["causal"] = gr.Checkbox(
            value=START["causal"], label="Causal mask", elem_id=prefix + "causal"
        )
    controls["mode"] = gr.Radio(
        MODES,
        value="forward",
        label="Measure",
        info="the backward is where training spends most of attention's time and memory",
        elem_id=prefix + "mode",
    )
    with gr.Row():
        controls["batch"] = slider("batch", "Batch B", prefix=prefix)
        controls["heads"] = slider("heads", "Heads H", prefix=prefix)
        controls["head_dim"] = slider("head_dim", "Head dim D", "a multiple of 8", prefix=prefix)
    preset, inference = inference_controls(prefix)
    controls.update(inference)
    controls.update(timing_controls(prefix))
    if counters:
        controls["counters"] = counters_control(prefix)
    targets = [name for name in PRESET_FIELDS if name in controls]
    from profiling.page.listeners import QUIET  # listeners reads this module's DEVICE

    preset.input(
        partial(preset_values, targets=targets),
        [preset],
        [controls[target] for target in targets],
        show_progress="hidden",
        **QUIET,
    )
    return {name: controls[name] for name in [*SHAPE_ORDER, "counters"] if name in controls}


def counters_control(prefix: str) -> gr.Checkbox:
    """Issue 36: the step once more under Nsight Compute; greyed out, with the reason as its
    info text, where counters cannot run (a CPU, a ZeroGPU Space, no ncu)."""
    reason = collect.unavailable_reason(DEVICE)
    info = (
        "after the run, the step once more in its own process under ncu (about 15 s more): "
        "DRAM bytes, occupancy, tensor-pipe use per kernel"
    )
    return gr.Checkbox(value=False, label="Hardware counters (Nsight Compute)",
                       info=f"unavailable here: {reason}" if reason else info,
                       interactive=not reason, elem_id=prefix + "counters")  # fmt: skip


def preset_values(name: str, targets: list[str]) -> list[Any]:
    """The fields a preset sets, in `targets`' order (a field it leaves alone: unchanged)."""
    return [PRESETS.get(name, {}).get(target, gr.update()) for target in targets]


def inference_controls(prefix: str) -> tuple[gr.Dropdown, dict[str, Any]]:
    """K/V heads, query length and window (empty: today's square multi-head attention), and
    the presets that fill them with the shapes people serve (issue 21)."""
    with gr.Accordion("Inference shape: grouped heads, decode, sliding window", open=False):
        preset = gr.Dropdown(
            [(name, name) for name in PRESETS], value=None, label="Preset",
            elem_id=prefix + "preset", filterable=False,
        )  # fmt: skip
        with gr.Row():
            controls = {name: optional_number(prefix + name, *texts)
                        for name, texts in OPTIONAL_FIELDS.items()}  # fmt: skip
    return preset, controls


# name → (label, placeholder shown while empty, info)
OPTIONAL_FIELDS = {
    "kv_heads": ("K/V heads", "one per query head", "empty: one per query head; 1: multi-query"),
    "q_len": ("Query length", "S", "empty: S; 1–64 for a decode against S keys"),
    "window": ("Sliding window", "none", "empty: none; each query sees its last keys"),
}


def optional_number(elem_id: str, label: str, placeholder: str, info: str) -> gr.Textbox:
    """A whole number that may stay empty (not set). A text box, not a gr.Number: Gradio 6's
    Number shows and sends 0 for None, below the minimum of 1, so opening the accordion made
    Profile fail and each keystroke's listener end in a 500 (issue 31). `read_optional` reads
    what it sends."""
    return gr.Textbox(value="", label=label, info=info, placeholder=placeholder, max_lines=1,
                      elem_id=elem_id, elem_classes=["optional-number"])  # fmt: skip


def read_optional(*values: Any) -> list[Any]:
    """The optional fields as the backend reads them: None or blank text is not set (None),
    text of a whole number is that number; anything else goes on as it came, for the backend
    to refuse by name. An API caller's number is left as it is (0 is refused there)."""
    read = []
    for value in values:
        if isinstance(value, str):
            text = value.strip()
            value = None if not text else int(text) if text.isdecimal() else value
        read.append(value)
    return read


def timing_controls(prefix: str) -> dict[str, Any]:
    """How the steps are timed and how many are measured (issue 23); a CPU has eager only."""
    title = "Timing: CUDA graph, cold L2, measured steps"
    with gr.Accordion(title, open=False), gr.Row():
        timing = gr.Radio(
            TIMINGS if DEVICE == "cuda" else TIMINGS[:1],
            value="eager",
            label="Timing",
            info="CUDA graph and cold L2 need a GPU" if DEVICE != "cuda" else None,
            elem_id=prefix + "timing",
        )
        steps = slider("steps", "Measured steps", "median and IQR over them", prefix=prefix)
    return {"timing": timing, "steps": steps}


def table(label: str, elem_id: str, **options: Any) -> gr.Dataframe:
    """A read-only table that wraps, scrolls past 420 px, and can be searched and copied."""
    defaults: dict[str, Any] = dict(
        interactive=False,
        wrap=True,
        max_height=420,
        show_search="search",
        buttons=["copy", "fullscreen"],
    )
    return gr.Dataframe(label=label, elem_id=elem_id, **{**defaults, **options})


def kernel_table(label: str, elem_id: str, **options: Any) -> gr.Dataframe:
    """The kernel table as Profile and Analyse show it: the decoding beside each name."""
    return table(
        label,
        elem_id,
        headers=views_shared.kernel_headers(),
        datatype=views_shared.kernel_datatypes(),
        column_widths=views_shared.kernel_widths(),
        max_chars=100,
        **options,
    )


# pixels per roofline column (by header): at a share of the page each, 15 headers broke letter
# by letter into a 120–190 px tall header; at these widths they keep whole words and the table
# scrolls sideways
ROOFLINE_WIDTHS = {"Kernel": 220, "Role": 120, "Figures from": 280, "Bound": 120,
                   "Compute roof": 140, "Full name": 420}  # fmt: skip


def roofline_table(label: str, elem_id: str, **options: Any) -> gr.Dataframe:
    """The per-kernel roofline table as Profile and Analyse show it."""
    headers = list(ROOFLINE_COLUMNS.values())
    return table(label, elem_id, headers=headers, max_chars=100,
                 column_widths=[ROOFLINE_WIDTHS.get(h, 96) for h in headers],
                 **options)  # fmt: skip


def variant_picker(
    elem_id: str, defaults: list[str], max_choices: int, info: str | None = None
) -> gr.Dropdown:
    """The multiselect of variants the Compare and Sweep tabs share, labelled as Profile's."""
    return gr.Dropdown(
        choices=views_profile.variant_choices(DEVICE, START["dtype"]),
        value=defaults,
        multiselect=True,
        max_choices=max_choices,
        label="Variants",
        info=info,
        elem_id=elem_id,
        filterable=False,
    )
