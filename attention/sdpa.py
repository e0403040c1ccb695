"""`F.scaled_dot_product_attention`, pinned to one backend or left to choose (04_c).

The math backend is the lesson: it upcasts to FP32, rebuilds the causal mask every call and
launches ~20 kernels; the fused backends launch one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS: dict[str, SDPBackend] = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """(B, nh, T, hs) in, (B, nh, T, hs) out; the backend is whatever the caller pinned."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def pinned(backend: str | None):
    """Context that pins SDPA to `backend` for warm-up and profiling alike (None: auto)."""
    if backend is None:
        return sdpa_kernel(list(BACKENDS.values()))
    return sdpa_kernel(BACKENDS[backend])


# The aten op each backend dispatches to (how a trace tells which backend ran) lives in
# profiling.vocabulary.BACKEND_OPS: the trace analyses read it without importing torch.
