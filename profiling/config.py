"""What one profiled run is, and the checks it must pass before anything is allocated.

Every value can come from an API call that ignored the sliders, so nothing here trusts its
input: types, ranges and the memory estimate are checked again in the backend, and each
refusal says what to change.
"""

from __future__ import annotations

import math
import os
import reprlib
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from attention import VARIANTS, Problem, Variant

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
DEVICES = ("auto", "cuda", "cpu")

# name: (lowest, highest). Wide enough for the H200's largest sensible runs; the memory
# estimate, not these bounds, is what refuses a run too big for the machine at hand.
LIMITS: dict[str, tuple[int, int]] = {
    "seq_len": (16, 131072),
    "batch": (1, 64),
    "heads": (1, 128),
    "head_dim": (16, 256),
    "steps": (1, 10),
}
HEAD_DIM_MULTIPLE = 8  # every fused backend needs head_dim % 8 == 0
MAX_ELEMENTS = 2**31 - 1  # per input tensor; int32 indexing in several kernels
WAIT, WARMUP = 1, 1  # the post's schedule(wait=1, warmup=1, active=steps)


class ConfigError(ValueError):
    """A request that cannot run as asked; the message says what to change."""


@dataclass(frozen=True)
class RunConfig:
    variant: str = "naive"
    seq_len: int = 1024
    dtype: str = "bfloat16"
    batch: int = 8
    heads: int = 16
    head_dim: int = 64
    causal: bool = True
    device: str = "auto"
    steps: int = 3

    @classmethod
    def from_user(cls, **raw: Any) -> RunConfig:
        """Coerce and validate loosely typed input (API JSON, CLI, sliders) or raise ConfigError."""
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"unknown parameter(s): {', '.join(unknown)}")
        defaults = cls()
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            value = raw.get(name, getattr(defaults, name))
            if value is None:
                raise ConfigError(f"{name} is missing")
            if name in LIMITS:
                value = _whole_number(name, value)
            elif name == "causal":
                value = _boolean(value)
            else:
                value = _choice_text(name, value)
            values[name] = value
        return cls(**values).validated()

    def validated(self) -> RunConfig:
        """Range and consistency checks that need no device; returns self or raises."""
        if self.variant not in VARIANTS:
            raise ConfigError(
                f"unknown variant {show(self.variant)}; choose one of: {', '.join(VARIANTS)}"
            )
        if self.dtype not in DTYPES:
            raise ConfigError(
                f"unknown dtype {show(self.dtype)}; choose one of: {', '.join(DTYPES)}"
            )
        if self.device not in DEVICES:
            raise ConfigError(
                f"unknown device {show(self.device)}; choose one of: {', '.join(DEVICES)}"
            )
        if not isinstance(self.causal, bool):
            raise ConfigError("causal must be true or false")
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be a whole number")
            if not low <= value <= high:
                raise ConfigError(f"{name} must be between {low} and {high}, got {value}")
        if self.head_dim % HEAD_DIM_MULTIPLE:
            raise ConfigError(
                f"head_dim must be a multiple of {HEAD_DIM_MULTIPLE}, got {self.head_dim}"
            )
        if self.batch * self.heads * self.seq_len * self.head_dim > MAX_ELEMENTS:
            raise ConfigError(
                "batch × heads × seq_len × head_dim exceeds 2³¹ elements per tensor; "
                "reduce one of them"
            )
        return self

    # -- derived --------------------------------------------------------------------
    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def spec(self) -> Variant:
        return VARIANTS[self.variant]

    def problem(self, device: str) -> Problem:
        """What a variant is built for: this shape and dtype on `device`."""
        return Problem(
            self.batch, self.heads, self.seq_len, self.head_dim, self.causal, self.torch_dtype,
            device,
        )  # fmt: skip

    @property
    def total_steps(self) -> int:
        return WAIT + WARMUP + self.steps

    def tag(self, device: str) -> str:
        """File-name tag encoding every parameter, like the post's `8_16_1024_64_flash_eager`:
        two downloaded traces never share a name, whichever variant made them."""
        return f"{self.variant}_{self.shape_tag(device)}"

    def shape_tag(self, device: str) -> str:
        """The tag without the variant: what the runs of one Compare have in common."""
        mask = "causal" if self.causal else "full"
        return (
            f"{self.batch}_{self.heads}_{self.seq_len}_{self.head_dim}_{self.dtype}_{mask}"
            f"_{device}_{self.steps}steps"
        )

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes).validated()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def shape_text(self) -> str:
        return f"B{self.batch} H{self.heads} S{self.seq_len} D{self.head_dim} {self.dtype}"


class _Shorter(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # repr of a huge int is slow, and refused past 4300 digits
            return f"an integer of about {int(x.bit_length() * math.log10(2)) + 1:,} digits"
        return super().repr_int(x, level)


_REPR = _Shorter()  # keyword arguments only from Python 3.12
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 2, 4, 4, 4
_REPR.maxstring = _REPR.maxother = 40


def show(value: Any, width: int = 40) -> str:
    """A caller's value, shortened for a message (bounded work, however big the value)."""
    text = _REPR.repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _whole_number(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ConfigError(f"{name} must be a whole number, got {show(value)}")
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {show(value)}")
    low, high = LIMITS[name]
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {show(value)}")
    return value


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"causal must be true or false, got {show(value)}")


def _choice_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be text, got {show(value)}")
    return value.strip()


# -- devices and memory -----------------------------------------------------------------
def resolve_device(requested: str) -> str:
    """`auto` → cuda when a GPU is visible. Call inside the GPU function on ZeroGPU."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but this machine has no CUDA GPU; use 'cpu'")
    return requested


# float64 scores per chunk of the reference check (runner._relative_error): 256 MiB to 1 GiB.
# It takes the smallest unless the memory check left spare bytes for a larger one.
REFERENCE_CHUNK = (32 * 1024**2, 128 * 1024**2)
LIBRARY_WORKSPACE = 64 * 1024**2  # cuBLAS/cuDNN workspaces a run may allocate and keep
# Small tensors (the reference's running sums, scalars, a kernel's lse) each take at least the
# CUDA allocator's smallest block (512 bytes); the H200 measured 1 KiB over an estimate that left
# them out (sdpa-efficient at B4 H16 S4096 D128).
SMALL_TENSORS = 1024**2


def estimate_bytes(config: RunConfig) -> int:
    """Peak bytes the whole run should need: the larger of its two phases.

    Profiled steps: inputs and output, the materialised score matrices (B·H·S² each: naive
    holds the scores, their masked copy and the softmax output, plus the S² bool mask; math
    does it in FP32; fused kernels hold none) and workspaces. Then the float64 reference check,
    while inputs and output are still alive: its smallest chunk (reference_bytes), and for a
    [batch, seq, heads, dim] variant a copy of the four tensors in [batch, heads, seq, dim].
    """
    v = config.spec
    elem = config.torch_dtype.itemsize
    b, h, s, d = config.batch, config.heads, config.seq_len, config.head_dim
    io = 4 * b * h * s * d * elem  # q, k, v, out
    score_elem = 4 if v.upcasts else elem
    scores = v.score_matrices * b * h * s * s * score_elem
    mask = s * s if v.score_matrices else 0
    workspace = LIBRARY_WORKSPACE + SMALL_TENSORS
    profiled = io + scores + mask + workspace + io // 4  # io // 4: lse, allocator slack
    copies = io if v.layout == "bshd" else 0
    checked = io + mask + workspace + copies + reference_bytes(config)
    return max(profiled, checked)


def reference_chunk(seq_len: int, pairs: int, budget: int) -> tuple[int, int]:
    """(query rows, (batch, head) pairs) of one reference chunk: at most `budget` scores."""
    rows = max(1, min(seq_len, budget // seq_len))
    return rows, max(1, min(pairs, budget // (rows * seq_len)))


def reference_bytes(config: RunConfig) -> int:
    """Peak float64 bytes of the reference check in its smallest chunk, G pairs × R rows.

    Beside the additive mask (R·S), the largest of its moments: the result's matmul (scores and
    softmax, 2·G·R·S; copies of k and v, 2·G·S·D; of q, out and the result, 3·G·R·D); the
    difference out − result (one score matrix, 4·G·R·D). With more than one chunk, the previous
    result and difference live on into the next (2·G·R·D), whose q and out (4·G·R·D in all)
    or k and v (4·G·S·D) are copied while the last ones live. Counted for every pair: a FLOP
    cap may check fewer, never more.
    """
    s, d, pairs = config.seq_len, config.head_dim, config.batch * config.heads
    rows, group = reference_chunk(s, pairs, REFERENCE_CHUNK[0])
    scores, keys, queries = group * rows * s, group * s * d, group * rows * d
    previous = 0 if (rows, group) == (s, pairs) else 2 * queries
    moments = [
        2 * scores + 2 * keys + 3 * queries + previous,
        scores + 2 * keys + 4 * queries + previous // 2,  # the last difference is replaced
    ]
    if previous:
        moments += [
            scores + 2 * keys + 4 * queries + previous,
            scores + 4 * keys + 2 * queries + previous,
        ]
    return 8 * (rows * s + max(moments))


def available_bytes(device: str) -> int:
    if device == "cuda":
        # Blocks PyTorch's caching allocator holds but no tensor uses are free to this run too:
        # without them an earlier large run would shrink every later estimate (seen on the H200:
        # "95 GiB free" after a naive S=8192 run had cached 33 GiB).
        free, _total = torch.cuda.mem_get_info()
        stats = torch.cuda.memory_stats()  # one snapshot for both figures (each call builds it)
        cached = stats.get("reserved_bytes.all.current", 0) - stats.get(
            "allocated_bytes.all.current", 0
        )
        return int(free + max(cached, 0))
    return _mem_available_cpu()


def _mem_available_cpu() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_memory(config: RunConfig, device: str, headroom: float = 0.85) -> int:
    """Refuse before allocating when the estimate exceeds the free memory; returns the usable
    bytes left once the estimate is set aside (the float64 reference check sizes its chunks
    by them)."""
    need = estimate_bytes(config)
    free = available_bytes(device)
    if need <= headroom * free:
        return int(headroom * free) - need
    fit = largest_fitting_seq_len(config, int(headroom * free))
    hint = (
        f"reduce seq_len to {fit} or less, or lower batch/heads"
        if fit
        else "lower batch, heads or head_dim"
    )
    where = "GPU memory free" if device == "cuda" else "RAM available"
    raise ConfigError(
        f"{config.variant} at {config.shape_text()} needs about {_gib(need)} "
        f"but only {_gib(free)} of {where} ({headroom:.0%} usable): {hint}"
    )


def largest_fitting_seq_len(config: RunConfig, budget: int) -> int | None:
    """The largest multiple of 128 a bisection finds whose estimate fits in `budget` (a length
    under 128 when none does), or None when not even the minimum fits."""
    low, high = LIMITS["seq_len"][0], config.seq_len
    if estimate_bytes(replace(config, seq_len=low)) > budget:
        return None
    while high - low > 1:
        mid = (low + high) // 2
        if estimate_bytes(replace(config, seq_len=mid)) <= budget:
            low = mid
        else:
            high = mid
    if low < 128:
        return low
    fit = low - low % 128
    # The reference's chunk makes the estimate rise and fall a little with S: step down to a
    # multiple of 128 that fits, not only one next to a length that fits.
    while fit > 128 and estimate_bytes(replace(config, seq_len=fit)) > budget:
        fit -= 128
    return fit if estimate_bytes(replace(config, seq_len=fit)) <= budget else low


def _gib(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"
