"""The page's device, its starting values, and the components several tabs build alike.

The page is built once per process for the device it finds; the shape controls of Profile,
Compare and Sweep share the Profile tab's ranges, so a value one tab accepts the others accept.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import gradio as gr

from profiling.analysis.columns import ROOFLINE_COLUMNS
from profiling.run import counters as collect
from profiling.views import profile as views_profile
from profiling.views import shared as views_shared
from profiling.workload.controls import (
    BY_NAME,
    JOB_OPTIONS,
    OPTIONAL_FIELDS,
    SHAPE_ORDER,
    docstring_lines,
)
from profiling.workload.spec import device_key, page_ranges, resolve_device

DEVICE = resolve_device()
START = views_shared.defaults(DEVICE)
RANGES = page_ranges(DEVICE)
DTYPES = ["bfloat16", "float16", "float32"]
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


# Gradio's slider clamps its number box into range when the box loses focus: a batch of -3
# typed, then Profile clicked, ran with B=1 without a word (issue 42). The page's <head> keeps
# what was typed (the box's blur stops before Gradio's handler), so the backend refuses it by
# name (workload.spec.check_typed_ranges) and nothing runs.
TYPED_AS_IS_HEAD = """<script>
window.addEventListener('blur', (event) => {
  const box = event.target;
  if (box instanceof HTMLInputElement && box.type === 'number' &&
      box.dataset.testid === 'number-input') event.stopPropagation();
}, true);
</script>"""


def slider(name: str, prefix: str = "") -> gr.Slider:
    """A shape slider over the page's range for `name`, starting at the page's default."""
    low, high, step = RANGES[name]
    label, info = BY_NAME[name].label, BY_NAME[name].info
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


def beside_shape(
    picks: Callable[[], Any], prefix: str, **shape_options: Any
) -> tuple[Any, dict[str, Any]]:
    """The top of Profile, Compare and Sweep: what `picks()` builds (the variants) on the
    left, the shape controls (`shape_controls(prefix, **shape_options)`) on the right."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=320):
            picked = picks()
        with gr.Column(scale=3, min_width=320):
            shape = shape_controls(prefix, **shape_options)
    return picked, shape


def shape_controls(prefix: str, seq_len: bool = True, counters: bool = False) -> dict[str, Any]:
    """seq_len (optional), dtype, batch, heads, head_dim, causal, mode (and, for Profile and
    Compare, the counters box): laid out as on the Profile tab, in the handlers' order."""
    controls: dict[str, Any] = {}
    if seq_len:
        controls["seq_len"] = slider("seq_len", prefix)
    with gr.Row():
        controls["dtype"] = gr.Radio(
            DTYPES, value=START["dtype"], label=BY_NAME["dtype"].label, elem_id=prefix + "dtype"
        )
        controls["causal"] = gr.Checkbox(
            value=START["causal"], label=BY_NAME["causal"].label, elem_id=prefix + "causal"
        )
    controls["mode"] = choice("mode", MODES, prefix)
    with gr.Row():
        for name in ("batch", "heads", "head_dim"):
            controls[name] = slider(name, prefix)
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
    return {name: controls[name] for name in [*SHAPE_ORDER, *JOB_OPTIONS] if name in controls}


def counters_control(prefix: str) -> gr.Checkbox:
    """Issue 36: the step once more under Nsight Compute; greyed out, with the reason as its
    info text, where counters cannot run (a CPU, a ZeroGPU Space, no ncu)."""
    reason, control = collect.unavailable_reason(DEVICE), BY_NAME["counters"]
    return gr.Checkbox(value=control.default, label=control.label,
                       info=f"unavailable here: {reason}" if reason else control.info,
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
            controls = {name: optional_number(name, prefix) for name in OPTIONAL_FIELDS}
    return preset, controls


def choice(name: str, choices: list[tuple[str, str]], prefix: str, **options: Any) -> gr.Radio:
    """A radio over `choices`, starting at the API's default for `name`."""
    control = BY_NAME[name]
    options = {"label": control.label, "info": control.info, **options}
    return gr.Radio(choices, value=control.default, elem_id=prefix + name, **options)


def optional_number(name: str, prefix: str) -> gr.Textbox:
    """A whole number that may stay empty (not set). A text box, not a gr.Number: Gradio 6's
    Number shows and sends 0 for None, below the minimum of 1, so opening the accordion made
    Profile fail and each keystroke's listener end in a 500 (issue 31). `read_optional` reads
    what it sends."""
    control = BY_NAME[name]
    return gr.Textbox(value="", label=control.label, info=control.info,
                      placeholder=control.placeholder, max_lines=1, elem_id=prefix + name,
                      elem_classes=["optional-number"])  # fmt: skip


def shape_handler(
    first: dict[str, tuple[Any, str]],
    summary: str,
    returns: str,
    each: str = "",
    options: tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A handler whose signature and docstring Gradio reads for the API page, built from the
    declared controls: `first` (name → (type, docstring line)), then every shape control (seq_len
    unless `first` has a list of them) and the job `options` it takes, with their API defaults,
    then Gradio's progress. The body is called as body(*first's values, shape (read_shape's
    dict), progress)."""
    names = [name for name in SHAPE_ORDER if not (name == "seq_len" and "seq_lens" in first)]
    names += options
    plain = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [
        inspect.Parameter(name, plain, annotation=kind) for name, (kind, _) in first.items()
    ]
    parameters += [
        inspect.Parameter(
            name, plain, default=BY_NAME[name].default, annotation=BY_NAME[name].annotation
        )
        for name in names
    ]
    progress = gr.Progress()  # Gradio's injection idiom: a default it replaces per call
    parameters.append(
        inspect.Parameter("progress", plain, default=progress, annotation=gr.Progress)
    )
    signature = inspect.Signature(parameters, return_annotation=tuple[Any, ...])
    lines = [f"        {name}: {text}" for name, (_, text) in first.items()]
    lines += docstring_lines(each, tuple(names))
    returns = "\n".join("        " + line for line in returns.splitlines())
    doc = f"{summary}\n\n    Args:\n" + "\n".join(lines) + f"\n\n    Returns:\n{returns}\n"

    def build(body: Callable[..., Any]) -> Callable[..., Any]:
        def handler(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            given = [values.pop(name) for name in (*first, "progress")]
            return body(*given[:-1], read_shape(values), given[-1])

        handler.__signature__ = signature  # type: ignore[attr-defined]
        handler.__annotations__ = {p.name: p.annotation for p in parameters} | {
            "return": tuple[Any, ...]
        }
        handler.__doc__ = doc
        handler.__name__ = handler.__qualname__ = body.__name__
        handler.__module__ = body.__module__
        return handler

    return build


def read_shape(values: dict[str, Any]) -> dict[str, Any]:
    """The shape as the backend reads it: `values` with its optional fields read."""
    optional = [name for name in OPTIONAL_FIELDS if name in values]
    return values | dict(zip(optional, read_optional(*map(values.get, optional)), strict=True))


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
        cpu_note = "CUDA graph and cold L2 need a GPU" if DEVICE != "cuda" else None
        timing = choice("timing", TIMINGS if DEVICE == "cuda" else TIMINGS[:1], prefix,
                        info=cpu_note)  # fmt: skip
        steps = slider("steps", prefix)
    return {"timing": timing, "steps": steps}


def table(
    label: str, elem_id: str, columns: views_shared.Columns | None = None, **options: Any
) -> gr.Dataframe:
    """A read-only table that wraps, scrolls past 420 px, and can be searched and copied;
    laid out by `columns` (a view's headers, datatypes and widths) where the view has them."""
    defaults: dict[str, Any] = dict(
        interactive=False,
        wrap=True,
        max_height=420,
        show_search="search",
        buttons=["copy", "fullscreen"],
    )
    settings = {**defaults, **(columns._asdict() if columns else {}), **options}
    if settings.get("headers") and settings.get("column_widths"):  # no header broken in a word
        settings["column_widths"] = views_shared.fit_header_widths(
            settings["headers"], settings["column_widths"]
        )
    if not settings.get("headers"):  # Gradio's placeholder headers read "1 2 3" before a run
        settings |= {"headers": [NOTHING_YET], "column_count": (1, "dynamic")}
    return gr.Dataframe(label=label, elem_id=elem_id, **settings)


NOTHING_YET = "(nothing yet)"  # a table's one header until its first result fills it


def kernel_table(label: str, elem_id: str, **options: Any) -> gr.Dataframe:
    """The kernel table as Profile and Analyse show it: the decoding beside each name."""
    return table(label, elem_id, views_shared.kernel_layout(), max_chars=100, **options)


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
    elem_id: str,
    defaults: Callable[[str, str], list[str]],
    max_choices: int,
    info: str | None = None,
) -> gr.Dropdown:
    """The multiselect of variants the Compare and Sweep tabs share, labelled as Profile's;
    `defaults(device, dtype)` preselects, at the dtype its choices are labelled for."""
    dtype = START["dtype"]
    return gr.Dropdown(
        choices=views_profile.variant_choices(DEVICE, dtype),
        value=defaults(DEVICE, dtype),
        multiselect=True,
        max_choices=max_choices,
        label="Variants",
        info=info,
        elem_id=elem_id,
        filterable=False,
    )
