"""`F.scaled_dot_product_attention`, pinned to one backend or left to choose (04_c).

The math backend is the lesson: it upcasts to FP32, rebuilds the causal mask every call and
launches ~20 kernels; the fused backends launch one. Each SDPA variant is a module of its own
(sdpa_auto, sdpa_math, sdpa_efficient, sdpa_flash, sdpa_cudnn) built by `sdpa_variant`.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import CausalBias, causal_lower_right

from attention.masks import visible
from attention.sdpa_reasons import SdpaCall, backend_checks, chosen_backend, lower_right_backend
from attention.variant import Built, Problem, Variant

BACKENDS: dict[str, SDPBackend] = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
REFUSALS = (
    "No available kernel",  # the pinned backends' checks all refused this input
    "No viable backend for scaled_dot_product_attention",  # none of them exists for the device
)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """(B, nh, T, hs) in, (B, nh, T, hs) out; the backend is whatever the caller pinned."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def call_arguments(problem: Problem) -> tuple[Any, bool, bool]:
    """(attn_mask, is_causal, enable_gqa) of the call for `problem` (see sdpa_for)."""
    mask: Any = None
    if problem.window is not None:
        mask = visible(
            0, problem.queries, problem.queries, problem.seq_len, True, problem.window,
            problem.device,
        )  # fmt: skip
    elif problem.causal and problem.queries != problem.seq_len:
        mask = causal_lower_right(problem.queries, problem.seq_len)
    return mask, problem.causal and mask is None, problem.group > 1


def sdpa_for(problem: Problem):
    """The call for an inference shape: `enable_gqa` for grouped heads (no copies; each backend
    says whether it takes them), causal bottom-right through `causal_lower_right` (SDPA's own
    `is_causal` aligns top-left when q_len ≠ kv_len), a window as an explicit boolean mask
    (which the fused backends refuse: torch says why)."""
    mask, is_causal, gqa = call_arguments(problem)

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # q (B, nh, T, hs); k, v (B, n_kv, S, hs)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, enable_gqa=gqa
        )

    return forward


def pinned(backend: str | None):
    """Context that pins SDPA to `backend` for warm-up and profiling alike (None: auto)."""
    if backend is None:
        return sdpa_kernel(list(BACKENDS.values()))
    return sdpa_kernel(BACKENDS[backend])


def pinning(backend: str | None):
    """A Variant's `context`: the pin, entered around warm-up and the profiled steps."""

    def context() -> contextlib.AbstractContextManager:
        return pinned(backend)

    return context


def declines(exc: Exception) -> bool:
    """SDPA pinned to backends that all refuse this input (a head dim, a dtype, a layout they
    do not take) raises one of these, and its warnings say why each backend said no."""
    return isinstance(exc, RuntimeError) and str(exc).startswith(REFUSALS)


def build(problem: Problem) -> Built:
    explain = explainer(problem)
    if problem.square:  # the post's call, as it always was
        return Built(lambda q, k, v: sdpa(q, k, v, problem.causal), "SDPA", explain=explain)
    return Built(sdpa_for(problem), "SDPA", explain=explain)


def explainer(problem: Problem):
    """torch's checks of each backend and its pick, for the run's inputs and this call's mask
    (attention/sdpa_reasons.py); asked inside the variant's pin, as the call is."""
    mask, is_causal, gqa = call_arguments(problem)
    # causal_lower_right goes through its own dispatch (CausalBias) before the dispatcher's:
    # its checks are asked of the mask it stands for, and its pick is marked as such
    through_bias = isinstance(mask, CausalBias)
    if through_bias:
        mask = mask._materialize(problem.device)

    def explain(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict:
        call = SdpaCall(q, k, v, mask, is_causal, gqa)
        if through_bias:  # the questions CausalBias asks first: no mask
            checks = backend_checks(call.unmasked())
            chosen = lower_right_backend(call)
        else:
            checks = backend_checks(call)
            chosen = chosen_backend(call)
        return {
            "checks": [
                {"backend": c.backend, "accepts": c.accepts, "reasons": list(c.reasons)}
                for c in checks
            ],
            "chosen": chosen,
            "through_causal_bias": through_bias,
        }

    return explain


def ran_as_seen(backend: str | None) -> str:
    """SDPA picks its kernel at call time: what ran is the backend the trace shows (its aten op,
    else its kernels' names: a CUDA graph's replay has no op)."""
    return f"SDPA {backend}" if backend else "SDPA (backend not visible in trace)"


def ran_as_seen_or_pinned(pinned: str | None):
    """A Variant's `ran_from_trace`: the backend the trace shows; where it shows none (the math
    backend replayed in a CUDA graph launches only generic kernels), the one backend the pin
    allows, said as such (SDPA pinned to one backend runs it or raises)."""

    def ran(backend: str | None) -> str:
        if backend or pinned is None:
            return ran_as_seen(backend)
        return f"SDPA {pinned} (pinned: the trace names no backend)"

    return ran


def sdpa_variant(*, backend: str | None, **fields: Any) -> Variant:
    """An SDPA variant pinned to `backend` (None: PyTorch picks); `fields` as Variant's."""
    return Variant(
        layout="bhsd",
        build=build,
        context=pinning(backend),
        declines=declines,
        ran_from_trace=ran_as_seen_or_pinned(backend),
        **fields,
    )


# The aten op each backend dispatches to (how a trace tells which backend ran) lives in
# profiling.vocabulary.BACKEND_OPS: the trace analyses read it without importing torch.
