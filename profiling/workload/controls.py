"""The workload's controls, declared once: what the page shows, what the API takes and says,
and what the command line's flags are, for every shape field after the variant(s).

Each `Control` holds a field's name, the type the API handlers annotate it with, its API
default, its line in the handlers' docstrings (Gradio shows it on the API page), the page's
label, info and per-device range, and its command-line flag. The page's controls
(profiling/page/controls.py), the Profile, Compare and Sweep handlers' signatures and
docstrings (`page.controls.shape_handler`) and the CLI's shape flags (profiling/cli/flags.py)
are built from `CONTROLS`; nothing here imports torch, so `analyze` and `diff` start fast.
The checks themselves stay in profiling/workload/spec.py (`LIMITS`, `CHOICES`, the page ranges).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from profiling.vocabulary import DTYPE_NAMES, LIMITS, MODES, TIMINGS

REQUIRED = inspect.Parameter.empty  # an API parameter with no default (the page always sends it)
OPTIONAL_NUMBER = float | str | None  # a text box's whole number, or empty (not set)


@dataclass(frozen=True)
class Flag:
    """A control's command-line flag: `--name-with-dashes` unless `option` says otherwise."""

    help: str
    default: Any = None
    type: Any = None
    choices: tuple[str, ...] | None = None
    option: str | None = None  # e.g. "--no-causal" (a store_true that inverts the field)
    limits: str | None = None  # the tail of "low–high… (default …)", from vocabulary.LIMITS


@dataclass(frozen=True)
class Control:
    """One shape field as the page, the API and the CLI present it."""

    name: str
    annotation: Any
    default: Any
    api: str  # the docstring line; "{each}" reads "" (Profile), " per variant", " per point"
    label: str
    flag: Flag
    info: str | None = None
    placeholder: str | None = None  # shown in an empty optional field's text box
    every_job: bool = True  # False: only the jobs that ask for it (Profile and Compare)
    # per device ("cuda", "cpu"): (minimum, maximum, slider step) the page and its API hold to
    ranges: dict[str, tuple[int, int, int]] = field(default_factory=dict)


def _range(low: int, high: int, step: int = 1) -> tuple[int, int, int]:
    return (low, high, step)


# in the handlers' order: mode, and after it the later fields, come last so API calls made
# before each existed keep their meaning
CONTROLS: tuple[Control, ...] = (
    Control("seq_len", float, REQUIRED, "sequence length S.", "Sequence length S",
            Flag("", 1024, int, limits=""),
            ranges={"cuda": _range(128, 16384, 128), "cpu": _range(64, 4096, 64)}),
    Control("dtype", str, REQUIRED, '"float32", "float16" or "bfloat16".', "dtype",
            Flag(f"{', '.join(DTYPE_NAMES)} (default %(default)s)", "bfloat16")),
    Control("batch", float, REQUIRED, "batch size B.", "Batch B", Flag("", 8, int, limits=""),
            ranges={"cuda": _range(1, 64), "cpu": _range(1, 8)}),
    Control("heads", float, REQUIRED, "number of heads H.", "Heads H",
            Flag("", 16, int, limits=""),
            ranges={"cuda": _range(1, 128), "cpu": _range(1, 16)}),
    Control("head_dim", float, REQUIRED, "head dimension D (a multiple of 8).", "Head dim D",
            Flag("", 64, int, limits=", a multiple of 8"), info="a multiple of 8",
            ranges={"cuda": _range(16, 256, 8), "cpu": _range(16, 128, 8)}),
    Control("causal", bool, REQUIRED, "causal mask (true) or full attention (false).",
            "Causal mask", Flag("full (non-causal) attention", option="--no-causal")),
    Control("mode", str, "forward",
            '"forward" (default), "backward" (the backward alone) or "train" (forward + '
            "backward of one step).", "Measure",
            Flag("what one step measures: the forward, the backward alone, or forward + "
                 "backward (default %(default)s)", "forward", choices=MODES),
            info="the backward is where training spends most of attention's time and memory"),
    Control("kv_heads", OPTIONAL_NUMBER, None,
            'K/V heads, dividing heads (None or "": one per query head).', "K/V heads",
            Flag("K/V heads, dividing --heads (default: one per query head)", type=int),
            info="empty: one per query head; 1: multi-query", placeholder="one per query head"),
    Control("q_len", OPTIONAL_NUMBER, None,
            'query length, 1 to seq_len (None or "": seq_len; a decode: 1–64).',
            "Query length",
            Flag("query length, 1 to the keys' length (default: the same; a decode: 1–64)",
                 type=int),
            info="empty: S; 1 to S queries against S keys (a decode: 1–64)", placeholder="S"),
    Control("window", OPTIONAL_NUMBER, None,
            'sliding window, the last keys each query sees (None or "": none; causal).',
            "Sliding window",
            Flag("sliding window: each query sees its last WINDOW keys (needs causal)", type=int),
            info="empty: none; each query sees its last keys", placeholder="none"),
    Control("timing", str, "eager",
            '"eager" (default), "cuda-graph" or "cold-l2" (the last two need a GPU).', "Timing",
            Flag("how the steps are timed: launched eagerly, each phase replayed as a CUDA graph "
                 "(no CPU launch cost), or after an L2 flush; the last two need a GPU (default "
                 "%(default)s)", "eager", choices=TIMINGS)),
    Control("steps", float, 3, "measured steps{each} (default 3): median and IQR over them.",
            "Measured steps",
            Flag("measured (active profiler) steps, median and IQR over them, ", 3, int,
                 limits=""),
            info="median and IQR over them",
            ranges={"cuda": _range(1, 30), "cpu": _range(1, 10)}),
    # issue 36: Profile's and Compare's only (a Sweep has none), last: older calls keep meaning
    Control("counters", bool, False,
            "after each run, its step once more under Nsight Compute (default false): DRAM "
            "bytes, occupancy, tensor-pipe use per kernel, or why they cannot be measured.",
            "Hardware counters (Nsight Compute)",
            Flag("after each run, its step once more under Nsight Compute (ncu on PATH, counters "
                 "allowed): DRAM bytes, occupancy, tensor-pipe use per kernel, or why not"),
            info="after the run, the step once more in its own process under ncu (about 15 s "
            "more): DRAM bytes, occupancy, tensor-pipe use per kernel", every_job=False),
)  # fmt: skip
BY_NAME: dict[str, Control] = {control.name: control for control in CONTROLS}
SHAPE_ORDER: tuple[str, ...] = tuple(c.name for c in CONTROLS if c.every_job)
JOB_OPTIONS: tuple[str, ...] = tuple(c.name for c in CONTROLS if not c.every_job)  # after them
OPTIONAL_FIELDS = tuple(c.name for c in CONTROLS if c.annotation is OPTIONAL_NUMBER)
# the order the CLI adds its flags in (its --help lists them so); "device" and "verbose" are
# the CLI's own, added between
FLAG_ORDER = ("seq_len", "dtype", "batch", "heads", "head_dim", "causal", "device", "verbose",
              "steps", "mode", "kv_heads", "q_len", "window", "timing", "counters")  # fmt: skip


def page_ranges(device_key: str) -> dict[str, tuple[int, int, int]]:
    """The page's (minimum, maximum, step) per ranged field on "cuda" or "cpu"."""
    return {c.name: c.ranges[device_key] for c in CONTROLS if c.ranges}


def flag_help(control: Control) -> str:
    """A flag's help: its text, and for a ranged field its limits (vocabulary.LIMITS, which
    the CLI checks; the page's ranges and its CPU budget are narrower) and its default."""
    flag = control.flag
    if flag.limits is None:
        return flag.help
    low, high = LIMITS[control.name]
    return f"{flag.help}{low}–{high}{flag.limits} (default %(default)s)"


def docstring_lines(each: str = "", names: tuple[str, ...] = SHAPE_ORDER) -> list[str]:
    """The handlers' `Args:` lines for `names`, one a line, indented as in a docstring."""
    return [f"        {name}: {BY_NAME[name].api.format(each=each)}" for name in names]
