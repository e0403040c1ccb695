"""The attention implementations a model run compares, as transformers names them, and why one
cannot run a model here (a known rule: refused with its reason, as the variants are).

"sdpa-<backend>" is transformers' "sdpa" with that SDPA backend forced through
`torch.nn.attention.sdpa_kernel` around warm-up and the measured steps; "kernels" is a
kernels-hub FlashAttention as transformers loads it (profiling/run/model/kernels.py falls back
to this project's Triton FlashAttention when the Hub cannot be reached, and says so).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention import rules
from profiling.workload.model.presets import Preset

HALF = (torch.float16, torch.bfloat16)
BACKENDS = {
    "sdpa-math": SDPBackend.MATH,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
}
CUDA_ONLY_BACKENDS = ("sdpa-efficient", "sdpa-cudnn")  # on a CPU SDPA has math and its flash
HALF_ONLY_BACKENDS = ("sdpa-flash", "sdpa-cudnn")
SOFTCAP_DROPPED = (
    "transformers' SDPA path has no logit soft-capping: {name}'s attn_logit_softcapping="
    "{cap:g} would be dropped and a different model computed (eager and flex_attention apply it)"
)


@dataclass(frozen=True)
class Implementation:
    """One row of the comparison: transformers' name for it, and what is entered around it."""

    id: str
    attn_implementation: str  # what transformers is told ("kernels" resolves at build time)
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    first_run: str = ""  # "compiles": its first call is slow (flex's torch.compile)


def _forced(backend: SDPBackend) -> Callable[[], contextlib.AbstractContextManager]:
    return lambda: sdpa_kernel([backend])


IMPLEMENTATIONS: dict[str, Implementation] = {
    "eager": Implementation("eager", "eager"),
    "sdpa": Implementation("sdpa", "sdpa"),
    **{key: Implementation(key, "sdpa", _forced(b)) for key, b in BACKENDS.items()},
    "flex_attention": Implementation("flex_attention", "flex_attention", first_run="compiles"),
    "kernels": Implementation("kernels", "kernels"),
}


def unavailable(implementation: str, preset: Preset, name: str, device: str, dtype) -> str | None:
    """Why `implementation` cannot run the preset here (None: it can)."""
    softcap = preset.softcap
    if implementation.startswith("sdpa") and softcap is not None:
        return SOFTCAP_DROPPED.format(name=name, cap=softcap)
    if implementation in CUDA_ONLY_BACKENDS and device != "cuda":
        return f"SDPA's {implementation[5:]} backend needs a CUDA GPU (this run is on {device})"
    if implementation in HALF_ONLY_BACKENDS and device == "cuda" and dtype not in HALF:
        return f"SDPA's {implementation[5:]} backend supports only float16 and bfloat16 on a GPU"
    if implementation == "flex_attention":
        return rules.compiler("flex_attention (transformers compiles flex_attention)")(
            device, dtype
        )
    if implementation == "kernels":
        return _kernels_rule(preset, name, device, dtype)
    return None


def _kernels_rule(preset: Preset, name: str, device: str, dtype) -> str | None:
    missing = rules.kernels_installed()
    if missing:
        return missing
    if device != "cuda":
        return f"a kernels-hub FlashAttention needs a CUDA GPU (this run is on {device})"
    if dtype not in HALF:
        return "FlashAttention supports only float16 and bfloat16"
    return None
