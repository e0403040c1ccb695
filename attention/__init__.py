"""The attention variants the app can profile: id → Variant.

Each variant knows how to compute causal (or full) attention and which machines it runs on;
nothing here knows about profiling. All compute softmax(q·kᵀ/√d)·v; they differ only in how.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch

Layout = Literal["bhsd", "bshd"]  # [batch, heads, seq, dim] (SDPA) or [batch, seq, heads, dim]
Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class VariantUnavailable(RuntimeError):
    """The variant cannot run on this machine or for this input, by a known rule; the message
    says which. Anything else that stops a variant is a failure, not this."""


@dataclass(frozen=True)
class Problem:
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool
    dtype: torch.dtype
    device: str


@dataclass(frozen=True)
class Built:
    forward: Forward
    ran: str  # what will actually run, e.g. "eager" or "Hub kernels-community/flash-attn2 v3"
    note: str = ""


@dataclass(frozen=True)
class Variant:
    id: str
    label: str
    family: str
    lesson: str  # what the trace teaches, one line
    layout: Layout
    build: Callable[[Problem], Built]
    unavailable: Callable[[str, torch.dtype], str | None]  # reason, or None when it can run
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    warmup_calls: int = 3
    score_matrices: int = 0  # B·H·S² matrices alive at peak (memory estimate)
    upcasts: bool = False  # scores held in FP32 whatever the input dtype
    tags: tuple[str, ...] = field(default_factory=tuple)
    # Whether an error raised at call time is the library refusing this input by its own rule
    # (the variant cannot run it), rather than a failure.
    declines: Callable[[Exception], bool] = lambda exc: False


def on_zero_gpu() -> bool:
    """A ZeroGPU Space, read as the `spaces` package reads SPACES_ZERO_GPU (1, t or true)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


# -- availability rules ----------------------------------------------------------------------
HALF = (torch.float16, torch.bfloat16)


def _capability() -> tuple[int, int]:
    return torch.cuda.get_device_capability()


def _anywhere(device: str, dtype: torch.dtype) -> str | None:
    return None


def _cuda_only(what: str, half_only: bool = False, min_cc: tuple[int, int] = (0, 0)):
    def check(device: str, dtype: torch.dtype) -> str | None:
        if device != "cuda":
            return f"{what} needs a CUDA GPU (this run is on {device})"
        if half_only and dtype not in HALF:
            return f"{what} supports only float16 and bfloat16"
        if _capability() < min_cc:
            major, minor = _capability()
            wanted = f"{min_cc[0]}.{min_cc[1]}"
            return f"{what} needs compute capability {wanted}+ (this GPU: {major}.{minor})"
        return None

    return check


def _flash_cpu_or_cuda(device: str, dtype: torch.dtype) -> str | None:
    if device == "cpu":
        return None  # PyTorch has a CPU flash implementation
    return _cuda_only("SDPA flash", half_only=True, min_cc=(8, 0))(device, dtype)


def _compiler(what: str):
    def check(device: str, dtype: torch.dtype) -> str | None:
        if on_zero_gpu():
            return f"{what} needs torch.compile, which ZeroGPU does not support"
        if device == "cpu" and not (shutil.which("g++") or shutil.which("c++")):
            return f"{what} on CPU needs a C++ compiler for Inductor (none on PATH)"
        return None

    return check


def _kernels_hub(repo: str, archs: tuple[tuple[int, int], ...]):
    def check(device: str, dtype: torch.dtype) -> str | None:
        if importlib.util.find_spec("kernels") is None:
            return "the `kernels` package is not installed (pip install kernels)"
        if device != "cuda":
            return f"{repo} needs a CUDA GPU (this run is on {device})"
        if dtype not in HALF:
            return f"{repo} supports only float16 and bfloat16"
        if not built_for(_capability(), archs):
            major, minor = _capability()
            wanted = ", ".join(f"{a}.{b}" for a, b in archs)
            return f"{repo} is built for compute capability {wanted} (this GPU: {major}.{minor})"
        return None

    return check


def built_for(capability: tuple[int, int], archs: tuple[tuple[int, int], ...]) -> bool:
    """CUDA's rule, as `kernels` applies it: a build for X.Y runs on X.Z for any Z ≥ Y (an
    sm_80 build runs on an L4's 8.9), never across major versions."""
    return any(capability[0] == major and capability[1] >= minor for major, minor in archs)


def _local_triton(device: str, dtype: torch.dtype) -> str | None:
    if importlib.util.find_spec("kernels") is None:
        return "the `kernels` package is not installed (pip install kernels)"
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed"
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if device != "cuda" and not interpret:
        return (
            "the local Triton build needs a CUDA GPU (TRITON_INTERPRET=1 runs it on CPU, for tests)"
        )
    if dtype not in HALF:
        return "the local Triton build supports only float16 and bfloat16"
    return None


SDPA_REFUSALS = (
    "No available kernel",  # the pinned backends' checks all refused this input
    "No viable backend for scaled_dot_product_attention",  # none of them exists for the device
)


def _sdpa_declines(exc: Exception) -> bool:
    """SDPA pinned to backends that all refuse this input (a head dim, a dtype, a layout they
    do not take) raises one of these, and its warnings say why each backend said no."""
    return isinstance(exc, RuntimeError) and str(exc).startswith(SDPA_REFUSALS)


# -- builders -------------------------------------------------------------------------------
def _naive(inplace: bool) -> Callable[[Problem], Built]:
    def build(p: Problem) -> Built:
        from attention.naive import NaiveCausalAttention, causal_mask

        module = NaiveCausalAttention(p.head_dim, inplace=inplace)
        mask = causal_mask(p.seq_len, p.device) if p.causal else None  # built once, as in the post
        return Built(lambda q, k, v: module(q, k, v, mask), "eager")

    return build


def _sdpa(p: Problem) -> Built:
    from attention.sdpa import sdpa

    return Built(lambda q, k, v: sdpa(q, k, v, p.causal), "SDPA")


def _sdpa_context(backend: str | None):
    def context() -> contextlib.AbstractContextManager:
        from attention.sdpa import pinned

        return pinned(backend)

    return context


def _sdpa_variant(*args, backend: str | None, **kw) -> Variant:
    """An SDPA variant: pinned to `backend` (None: PyTorch picks), torch's refusals declined."""
    return Variant(*args, context=_sdpa_context(backend), declines=_sdpa_declines, **kw)


def _flex(p: Problem) -> Built:
    from attention.compiled import build_flex

    backend = "Triton" if p.device == "cuda" else "C++"  # what Inductor generates there
    return Built(build_flex(p.seq_len, p.causal, p.device), f"torch.compile (Inductor, {backend})")


def _compiled_naive(p: Problem) -> Built:
    from attention.compiled import build_compiled_naive

    forward = build_compiled_naive(p.head_dim, p.seq_len, p.causal, p.device)
    return Built(
        forward,
        "torch.compile (Inductor)" if p.device == "cuda" else "torch.compile (Inductor, C++)",
    )


def _hub(repo: str) -> Callable[[Problem], Built]:
    def build(p: Problem) -> Built:
        from attention import hub

        kernel = hub.load(repo)
        hub.check_head_dim(kernel, p.head_dim)
        return Built(
            lambda q, k, v: hub.call(kernel, q, k, v, p.causal), kernel.source, kernel.note
        )

    return build


def _local_build(p: Problem) -> Built:
    from attention import hub

    kernel = hub.load_local_build()
    hub.check_head_dim(kernel, p.head_dim)
    return Built(lambda q, k, v: hub.call(kernel, q, k, v, p.causal), kernel.source)


_V, _S = Variant, _sdpa_variant
VARIANTS: dict[str, Variant] = {
    v.id: v
    for v in [
        _V("naive", "Naive (out-of-place masked_fill)", "naive",
           "matmul → scale → masked_fill → softmax → matmul; the out-of-place masked_fill hides a "
           "full Memcpy of the scores",
           "bhsd", _naive(False), _anywhere, score_matrices=3),
        _V("naive-inplace", "Naive, in-place masked_fill_", "naive",
           "one character (masked_fill_) removes the Memcpy: one fewer GPU op per forward",
           "bhsd", _naive(True), _anywhere, score_matrices=2),
        _S("sdpa-auto", "SDPA (PyTorch picks the backend)", "sdpa",
           "F.scaled_dot_product_attention unpinned: the trace shows which backend PyTorch chose",
           "bhsd", _sdpa, _anywhere, backend=None, score_matrices=3, upcasts=True),
        _S("sdpa-math", "SDPA · math backend", "sdpa",
           "the reference path: upcasts to FP32 (no tensor cores), rebuilds the causal mask every "
           "call, ~20 kernels per forward",
           "bhsd", _sdpa, _anywhere, backend="math", score_matrices=3, upcasts=True),
        _S("sdpa-efficient", "SDPA · memory-efficient backend", "sdpa",
           "one fused kernel: fmha_cutlassF, the xformers memory-efficient attention",
           "bhsd", _sdpa, _cuda_only("SDPA efficient"), backend="efficient"),
        _S("sdpa-flash", "SDPA · FlashAttention backend", "sdpa",
           "one fused FlashAttention-2 kernel; fastest though its occupancy reads low (255 "
           "registers/thread)",
           "bhsd", _sdpa, _flash_cpu_or_cuda, backend="flash"),
        _S("sdpa-cudnn", "SDPA · cuDNN backend", "sdpa",
           "one kernel cuDNN generates for this problem; the cost moves to a fat CPU bar (plan "
           "selection) and a cuLaunchKernelEx",
           "bhsd", _sdpa, _cuda_only("SDPA cuDNN", half_only=True, min_cc=(8, 0)),
           backend="cudnn"),
        _V("kernels-flash-attn2", "FlashAttention-2 from the kernels Hub", "kernels",
           "a pre-built, version-pinned FlashAttention loaded with kernels.get_kernel, in its own "
           "[batch, seq, heads, dim] layout",
           "bshd", _hub("kernels-community/flash-attn2"),
           _kernels_hub("kernels-community/flash-attn2", ((8, 0), (9, 0), (10, 0), (12, 0)))),
        _V("kernels-flash-attn3", "FlashAttention-3 from the kernels Hub (Hopper)", "kernels",
           "FlashAttention-3: Hopper's wgmma and TMA, loaded from the Hub",
           "bshd", _hub("kernels-community/flash-attn3"),
           _kernels_hub("kernels-community/flash-attn3", ((8, 0), (9, 0)))),
        _V("kernels-local-triton", "FlashAttention in Triton, local kernels build", "kernels",
           "our own Triton FlashAttention loaded through kernels from disk: readable source next "
           "to the vendor kernels",
           "bshd", _local_build, _local_triton),
        _V("flex", "FlexAttention (compiled)", "compiled",
           "a causal block_mask compiled by Inductor into one Triton kernel",
           "bhsd", _flex, _compiler("FlexAttention"), warmup_calls=5),
        _V("compiled-naive", "torch.compile(naive in-place)", "compiled",
           "Inductor fuses scale, mask and softmax into Triton kernels around two cuBLAS matmuls",
           "bhsd", _compiled_naive, _compiler("torch.compile"), warmup_calls=5,
           score_matrices=2),
    ]
}  # fmt: skip


def availability(device: str, dtype: torch.dtype) -> dict[str, str | None]:
    """id → reason it cannot run here (None when it can)."""
    return {vid: v.unavailable(device, dtype) for vid, v in VARIANTS.items()}
