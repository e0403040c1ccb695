"""What the forward and the backward share: input checks, the softmax scale, launch helpers."""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from typing import Any

import torch

# TRITON_INTERPRET=1 must be set before triton is imported; then kernels run on CPU tensors.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128, 256)


def check_inputs(q: Any, k: Any, v: Any, softmax_scale: Any) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 4:
        raise ValueError(f"q must be 4-D [batch, seq, heads, head_dim], got shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            "q, k, v must have the same shape [batch, seq, heads, head_dim]; got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype must be torch.float16 or torch.bfloat16, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one dtype; got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    head_dim = q.shape[-1]
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {head_dim}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(
            f"q, k, v must be on one device; got q {q.device}, k {k.device}, v {v.device}"
        )
    if softmax_scale is not None and (
        not isinstance(softmax_scale, numbers.Real)
        or isinstance(softmax_scale, bool)
        or not math.isfinite(softmax_scale)
    ):
        raise ValueError(f"softmax_scale must be None or a finite number, got {softmax_scale!r}")
    if q.device.type != "cuda" and not INTERPRET:
        raise ValueError(
            f"q, k, v must be CUDA tensors, got device {q.device} (to run on CPU, set "
            "TRITON_INTERPRET=1 before triton is imported: Triton's interpreter, slow)"
        )


def resolve_scale(softmax_scale: float | None, head_dim: int) -> float:
    """The softmax scale the kernels use: 1/sqrt(head_dim) unless given."""
    return 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)


def device_scope(t: torch.Tensor) -> contextlib.AbstractContextManager[Any]:
    """Launch on t's GPU (Triton launches on the current device), a no-op on CPU."""
    return torch.cuda.device(t.device) if t.device.type == "cuda" else contextlib.nullcontext()


def upcast_dot(dtype: torch.dtype) -> bool:
    """True where tl.dot must see fp32: Triton's interpreter (3.9) multiplies the raw uint16
    storage of bf16 in tl.dot, so it gets the same bf16 values as fp32. Compiled kernels never
    take this path."""
    return INTERPRET and dtype == torch.bfloat16
