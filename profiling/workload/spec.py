"""What one profiled run is, and every check it must pass before anything is allocated.

Every value can come from an API call that ignored the sliders, so nothing here trusts its
input. The page, the API and the CLI all build a `Workload` through `Workload.from_user` (the
page adds `page_workload`'s ranges and CPU budget); Compare and Sweep build a list of them
(profiling.workload.request). Each rule is decided once, here: field types and ranges (`LIMITS`,
`CHOICES`), known variant ids, the page's per-device ranges, the CPU budget, the device.

A new field (a mode, kv_heads, a window…) is a dataclass field, annotated int, bool or str
(`| None` when it may be left out), plus its rule in `LIMITS` or `CHOICES` (a bool needs none):
`from_user`, `validated`, `shape_from_user` and `shape()` pick it up; only the code that uses
it changes elsewhere (tests/workload/test_workload.py adds one to see it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from attention import VARIANTS, Problem, Variant
from attention.masks import visible_pairs
from profiling.analysis.summary import BACKWARD_FLOPS, attention_flops
from profiling.user_values import ConfigError, coerced, field_rules, show
from profiling.vocabulary import (
    BACKWARD,
    DEVICES,
    DTYPE_NAMES,
    LIMITS,
    MODE_PHASES,
    MODES,
    TIMINGS,
    measured_span,
)
from profiling.workload import controls

DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name) for name in DTYPE_NAMES
}  # DEVICES, MODES, LIMITS: profiling.vocabulary
# text field → the values it takes; `variant` takes the registry's ids, read when checked (a
# variant registered later is known at once)
CHOICES: dict[str, tuple[str, ...]] = {
    "dtype": tuple(DTYPES), "device": DEVICES, "mode": MODES, "timing": TIMINGS,
}  # fmt: skip

HEAD_DIM_MULTIPLE = 8  # every fused backend needs head_dim % 8 == 0
MAX_ELEMENTS = 2**31 - 1  # per input tensor; int32 indexing in several kernels
WAIT, WARMUP = 1, 1  # the post's schedule(wait=1, warmup=1, active=steps)

# The page's ranges per device: (minimum, maximum, slider step). LIMITS are wider, for the CLI;
# the page and its API are held to these (the GPU slot and the CPU budget are sized for them).
PAGE_RANGES: dict[str, dict[str, tuple[int, int, int]]] = {
    key: controls.page_ranges(key) for key in ("cuda", "cpu")
}  # declared with each control: profiling/workload/controls.py
CPU_MAX_FLOPS = 2e10  # per forward, on CPU only: a CPU Space must stay responsive


def passes(check: Callable[..., None], *args: Any) -> bool:
    """Whether `check(*args)` accepts them, i.e. raises no ConfigError."""
    try:
        check(*args)
    except ConfigError:
        return False
    return True


@dataclass(frozen=True)
class Workload:
    """The one description of what is run: a variant at a shape, dtype and device."""

    variant: str = "naive"
    seq_len: int = 1024
    dtype: str = "bfloat16"
    batch: int = 8
    heads: int = 16
    head_dim: int = 64
    causal: bool = True
    device: str = "auto"
    steps: int = 3
    mode: str = "forward"
    # Inference shapes (issue 21); None keeps today's square multi-head attention. seq_len is
    # the keys' length (a decode's KV cache), q_len the queries' (bottom-right aligned).
    kv_heads: int | None = None
    q_len: int | None = None
    window: int | None = None
    timing: str = "eager"  # issue 23: eager | cuda-graph | cold-l2 (TIMINGS)
    # issue 36: after the run, the step once more under Nsight Compute (profiling/run/counters.py)
    counters: bool = False

    @classmethod
    def from_user(cls, **raw: Any) -> Workload:
        """Coerce and validate loosely typed input (API JSON, CLI, sliders) or raise ConfigError."""
        values = coerced(raw, cls, tuple(field_rules(cls)), "parameter", LIMITS)
        return cls(**_checked(values, cls))

    def validated(self) -> Workload:
        """The same checks on a workload built directly; returns self or raises ConfigError."""
        _checked(asdict(self), type(self))
        return self

    # -- derived --------------------------------------------------------------------
    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def spec(self) -> Variant:
        return VARIANTS[self.variant]

    @property
    def flops(self) -> float:
        """FLOPs of one measured step: its phases' (forward_flops per phase, phase_flops)."""
        return sum(self.phase_flops(phase) for phase in self.phases)

    @property
    def forward_flops(self) -> float:
        """FLOPs of one forward: 4·D per visible (query, key) pair per head (the square causal
        case counted as half, as always)."""
        if self.q_len is None and self.window is None:
            return attention_flops(self.batch, self.heads, self.seq_len, self.head_dim, self.causal)
        pairs = visible_pairs(self.queries, self.seq_len, self.causal, self.window)
        return 4.0 * self.batch * self.heads * self.head_dim * pairs

    # the variants' own rules (q_len or seq_len; kv_heads or heads), on this workload's fields
    queries = Problem.queries
    key_heads = Problem.key_heads

    def tensor_shape(self, name: str, layout: str = "bhsd") -> tuple[int, int, int, int]:
        """q (and the output's gradient) with the queries and every head; k and v with the
        keys and their K/V heads; in the variant's layout (bhsd or bshd)."""
        heads, length = (self.heads, self.queries) if name in ("q", "grad_out") else (
            self.key_heads, self.seq_len)  # fmt: skip
        if layout == "bhsd":
            return (self.batch, heads, length, self.head_dim)
        return (self.batch, length, heads, self.head_dim)

    @property
    def io_bytes(self) -> int:
        """Bytes a forward must move at least: q and the output once each, K and V once."""
        queries = self.batch * self.heads * self.queries * self.head_dim
        keys = self.batch * self.key_heads * self.seq_len * self.head_dim
        return (2 * queries + 2 * keys) * self.torch_dtype.itemsize

    def phase_flops(self, phase: str) -> float:
        """A phase's FLOPs: the backward counted as BACKWARD_FLOPS × the forward's."""
        return self.forward_flops * (BACKWARD_FLOPS if phase == BACKWARD else 1.0)

    @property
    def phases(self) -> tuple[str, ...]:
        """The record_function spans one measured step is made of, in order."""
        return MODE_PHASES[self.mode]

    @property
    def measured(self) -> str:
        """The span around one measured step: the phase itself, or a train step's STEP."""
        return measured_span(self.mode)

    @property
    def needs_grad(self) -> bool:
        return self.mode != "forward"

    def problem(self, device: str) -> Problem:
        """What a variant is built for: this shape and dtype on `device`."""
        shape = {field.name: getattr(self, field.name) for field in dataclasses.fields(Problem)
                 if field.name not in ("dtype", "device")}  # fmt: skip
        return Problem(dtype=self.torch_dtype, device=device, **shape)

    @property
    def total_steps(self) -> int:
        return WAIT + WARMUP + self.steps

    def tag(self, device: str) -> str:
        """File-name tag encoding every parameter, like the post's `8_16_1024_64_flash_eager`:
        two downloaded traces never share a name, whichever variant made them."""
        return f"{self.variant}_{self.shape_tag(device)}"

    def shape_tag(self, device: str) -> str:
        """The tag without the variant: what the runs of one Compare have in common."""
        return shape_tag(self.shape(), device)

    def shape(self) -> dict[str, Any]:
        """Every field but the variant: what the runs of one Compare share."""
        return {k: v for k, v in asdict(self).items() if k != "variant"}

    def with_(self, **changes: Any) -> Workload:
        return replace(self, **changes).validated()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def shape_text(self) -> str:
        """`B4 H32/KV8 Q1 S8192 D128 bfloat16 window 1024 train`: the parts a run sets."""
        heads = f"H{self.heads}" + (f"/KV{self.kv_heads}" if self.kv_heads else "")
        queries = f" Q{self.q_len}" if self.q_len else ""
        window = f" window {self.window}" if self.window else ""
        mode = "" if self.mode == "forward" else f" {self.mode}"
        return (
            f"B{self.batch} {heads}{queries} S{self.seq_len} D{self.head_dim} {self.dtype}"
            f"{window}{mode}"
        )


FIELDS = tuple(f.name for f in dataclasses.fields(Workload))
SHAPE_FIELDS = tuple(name for name in FIELDS if name != "variant")


def shape_from_user(**raw: Any) -> dict[str, Any]:
    """A shape checked as a shape: every field but the variant, coerced and validated like
    `Workload.from_user` (defaults filled in). What the runs of a Compare or Sweep share."""
    return _checked(coerced(raw, Workload, SHAPE_FIELDS, "shape parameter", LIMITS), Workload)


def shape_tag(shape: Mapping[str, Any], device: str) -> str:
    """`8_16_1024_64_bfloat16_causal_cuda_3steps` (`…_3steps_train` for a training step);
    without seq_len when the shape has none (a sweep's lengths vary)."""
    mask = "causal" if shape["causal"] else "full"
    length = f"_{shape['seq_len']}" if "seq_len" in shape else ""
    mode = shape.get("mode", "forward")
    extra = "".join(
        f"_{short}{shape[name]}"
        for name, short in (("kv_heads", "kv"), ("q_len", "q"), ("window", "w"))
        if shape.get(name) is not None
    )
    extra += "" if shape.get("timing", "eager") == "eager" else f"_{shape['timing']}"
    return (
        f"{shape['batch']}_{shape['heads']}{length}_{shape['head_dim']}_{shape['dtype']}_{mask}"
        f"_{device}_{shape['steps']}steps" + ("" if mode == "forward" else f"_{mode}") + extra
    )


def choices(name: str) -> tuple[str, ...]:
    """The values text field `name` accepts; variants are the registry's, read now."""
    return tuple(VARIANTS) if name == "variant" else CHOICES[name]


def known_variants(names: Iterable[str]) -> list[str]:
    """`names` without duplicates, each a registered variant id, or a ConfigError naming the
    unknown ones (at most five) and the ids to choose from."""
    names = list(dict.fromkeys(names))
    known = choices("variant")
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        what = "unknown variant(s): " + ", ".join(show(v) for v in unknown[:5])
        what = what if unknown else "no variant"
        raise ConfigError(f"{what}; choose from: {', '.join(known)}")
    return names


def _checked(values: dict[str, Any], cls: type) -> dict[str, Any]:
    """Range and consistency checks that need no device, on the fields `values` holds (a None
    where the field allows it is not checked); returns `values` or raises ConfigError."""
    kinds = {name: field_rules(cls)[name][0] for name, value in values.items() if value is not None}
    for name in kinds:
        if kinds[name] == "str" and values[name] not in choices(name):
            raise ConfigError(
                f"unknown {name} {show(values[name])}; choose one of: {', '.join(choices(name))}"
            )
    for name in kinds:
        if kinds[name] == "bool" and not isinstance(values[name], bool):
            raise ConfigError(f"{name} must be true or false")
    for name, (low, high) in LIMITS.items():
        if name not in kinds:
            continue
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be a whole number")
        if not low <= value <= high:
            raise ConfigError(f"{name} must be between {low} and {high}, got {show(value)}")
    if values["head_dim"] % HEAD_DIM_MULTIPLE:
        raise ConfigError(
            f"head_dim must be a multiple of {HEAD_DIM_MULTIPLE}, got {values['head_dim']}"
        )
    if values["batch"] * values["heads"] * values["seq_len"] * values["head_dim"] > MAX_ELEMENTS:
        raise ConfigError(
            "batch × heads × seq_len × head_dim exceeds 2³¹ elements per tensor; reduce one of them"
        )
    _check_inference_shape(values)
    return values


def _check_inference_shape(values: dict[str, Any]) -> None:
    """kv_heads divides heads, q_len at most seq_len (the keys), a window only where queries
    see keys in order (causal) and no wider than the keys."""
    heads, kv_heads = values["heads"], values.get("kv_heads")
    if kv_heads is not None and (kv_heads > heads or heads % kv_heads):
        raise ConfigError(
            f"kv_heads must divide heads ({heads}): each K/V head serves a group of query "
            f"heads, got {kv_heads}"
        )
    q_len, seq_len = values.get("q_len"), values["seq_len"]
    if q_len is not None and q_len > seq_len:
        raise ConfigError(
            f"q_len ({q_len}) must be at most seq_len ({seq_len}), the keys' length (the KV "
            "cache a decode step reads)"
        )
    window = values.get("window")
    if window is not None and not values["causal"]:
        raise ConfigError("a sliding window needs the causal mask: each query sees the last keys")
    if window is not None and window > seq_len:
        raise ConfigError(f"window ({window}) must be at most seq_len ({seq_len})")


# -- the page: its ranges and the CPU budget --------------------------------------------
def device_key(device: str) -> str:
    """The key of PAGE_RANGES (and of every per-device page setting) for `device`."""
    return "cuda" if device == "cuda" else "cpu"


def page_ranges(device: str) -> dict[str, tuple[int, int, int]]:
    return dict(PAGE_RANGES[device_key(device)])


def check_page_ranges(shape: Mapping[str, Any], device: str) -> None:
    """The page's ranges on `shape` (a workload's fields), enforced in the backend too: an API
    caller gets what the page offers. The slider step is not enforced, except head_dim's
    multiple of 8 (HEAD_DIM_MULTIPLE)."""
    check_typed_ranges(shape, device)
    check_timing(shape.get("timing", "eager"), device)


def check_typed_ranges(raw: Mapping[str, Any], device: str) -> None:
    """Each number in `raw` (as typed, before coercion) within the page's range for it: a batch
    of -3 typed into the page is refused with the page's range (1–8 on a CPU), not the CLI's
    wider LIMITS, and never clamped (issue 42). What is not a number is left to `from_user`."""
    for name, (low, high, _step) in page_ranges(device).items():
        value = raw.get(name)
        number = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
        if number and not isinstance(value, bool) and not low <= value <= high:
            raise ConfigError(
                f"{name} must be between {low} and {high} on this machine, got {show(value)}"
            )


def check_timing(timing: str, device: str) -> None:
    """A CUDA graph and an L2 flush need a GPU (the runner asks too, for the CLI)."""
    if timing != "eager" and device_key(device) == "cpu":
        raise ConfigError(f"timing '{timing}' needs a CUDA GPU; on a CPU use 'eager'")


def check_cpu_budget(workload: Workload, device: str) -> None:
    """Refuse CPU runs too big to finish promptly (the GPU path is bounded by its slot)."""
    if device != "cpu":
        return
    if workload.flops > CPU_MAX_FLOPS:
        raise ConfigError(
            f"{workload.shape_text()} needs {workload.flops / 1e9:,.0f} GFLOP per forward; on a "
            f"CPU this app runs at most {CPU_MAX_FLOPS / 1e9:,.0f}: lower seq_len, batch or heads"
        )


def within_cpu_budget(workload: Workload, device: str) -> bool:
    return passes(check_cpu_budget, workload, device)


def page_workload(device: str, **raw: Any) -> Workload:
    """A Profile request from the page or its API: the fields, the page's ranges on `device`
    and, on a CPU, the budget of one run."""
    check_typed_ranges(raw, device)
    workload = Workload.from_user(**raw)
    check_page_ranges(workload.shape(), device)
    check_cpu_budget(workload, device)
    return workload


# -- the device -------------------------------------------------------------------------
def resolve_device(requested: str = "auto") -> str:
    """`auto` → cuda when a GPU is visible. On ZeroGPU CUDA reads as available outside the GPU
    slot too, so the page is built for the GPU it will run on."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but this machine has no CUDA GPU; use 'cpu'")
    return requested
