"""What the forward and the backward share: input checks, the softmax scale, launch helpers."""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from dataclasses import dataclass
from typing import Any

import torch

# TRITON_INTERPRET=1 must be set before triton is imported; then kernels run on CPU tensors.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128, 256)


def check_inputs(q: Any, k: Any, v: Any, softmax_scale: Any, window_size: Any = (-1, -1)) -> None:
    """q [batch, q_len, heads, D]; k, v [batch, kv_len, kv_heads, D] with heads % kv_heads == 0."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 4:
        raise ValueError(f"q must be 4-D [batch, seq, heads, head_dim], got shape {tuple(q.shape)}")
    if k.shape != v.shape or k.dim() != 4:
        raise ValueError(
            "k and v must have the same shape [batch, kv_len, kv_heads, head_dim]; got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    batch, _, heads, head_dim = q.shape
    if k.shape[0] != batch or k.shape[3] != head_dim or k.shape[2] < 1 or heads % k.shape[2]:
        raise ValueError(
            "k, v must be [batch, kv_len, kv_heads, head_dim] with q's batch and head_dim and "
            f"kv_heads dividing q's heads; got q {tuple(q.shape)}, k {tuple(k.shape)}"
        )
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype must be torch.float16 or torch.bfloat16, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one dtype; got q {q.dtype}, k {k.dtype}, v {v.dtype}")
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
    check_window(window_size)
    if q.device.type != "cuda" and not INTERPRET:
        raise ValueError(
            f"q, k, v must be CUDA tensors, got device {q.device} (to run on CPU, set "
            "TRITON_INTERPRET=1 before triton is imported: Triton's interpreter, slow)"
        )


@dataclass(frozen=True)
class Window:
    """Which keys each query row sees, as the kernels take it.

    Query i sees keys j with i + lo_diag <= j <= i + hi_diag (bottom-right aligned: the
    offset kv_len - q_len is folded in). An unbounded side is q_len + kv_len away, so the
    kernels need no special case for it. `windowed` (constexpr WINDOW) turns the left bound
    on in the masks; `may_be_empty` (constexpr MAY_BE_EMPTY) says a row can see no key at
    all (output 0, LSE +inf) or none in its first masked tile, so the softmax state must
    guard against a row max of -inf.
    """

    lo_diag: int
    hi_diag: int
    windowed: bool
    may_be_empty: bool


def check_window(window_size: Any) -> tuple[int, int]:
    """window_size as FlashAttention takes it: (left, right), -1 = unbounded."""
    ok = (
        isinstance(window_size, (tuple, list))
        and len(window_size) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) and x >= -1 for x in window_size)
    )
    if not ok:
        raise ValueError(f"window_size must be (left, right), ints >= -1, got {window_size!r}")
    return int(window_size[0]), int(window_size[1])


def resolve_window(
    window_size: tuple[int, int], causal: bool, seqlen_q: int, seqlen_k: int
) -> Window:
    """The bounds of FlashAttention's window_size (right is 0 when causal), bottom-right
    aligned: query i's diagonal is key i + kv_len - q_len."""
    left, right = check_window(window_size)
    unbounded = seqlen_q + seqlen_k  # no row reaches further (keeps int32 math safe)
    left = unbounded if left < 0 else min(left, unbounded)
    right = 0 if causal else (unbounded if right < 0 else min(right, unbounded))
    windowed = left < unbounded or (right < unbounded and not causal)
    offset = seqlen_k - seqlen_q
    # A row sees nothing when its window lies wholly outside [0, kv_len).
    may_be_empty = offset + right < 0 or offset - left + seqlen_q - 1 >= seqlen_k
    return Window(offset - left, offset + right, windowed, may_be_empty or windowed)


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


def checked_l2_group(group: Any, name: str = "l2_group") -> int:
    """A launch order's group size (flash_bounds._launch_tile): a whole number >= 0."""
    if isinstance(group, bool) or not isinstance(group, int) or group < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {group!r}")
    return group


L2_BYTES_UNKNOWN = 50 * 2**20  # an H100's L2, for a device torch cannot ask (the interpreter)
_L2_BYTES: dict[torch.device, int] = {}


def l2_bytes(device: torch.device) -> int:
    """The device's L2 cache in bytes (asked once per device)."""
    if device not in _L2_BYTES:
        found = 0
        if device.type == "cuda":
            found = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        _L2_BYTES[device] = found or L2_BYTES_UNKNOWN
    return _L2_BYTES[device]


def launch_group(k: torch.Tensor, group: int) -> int:
    """The launch order (flash_bounds._launch_tile) of a kernel reading this K and V: `group`
    where K and V of all (batch, head) pairs together are more than L2 holds, else 0 (the
    grid's own). Step 9 on an H100 (docs/flash-triton-notes.md): grouped, B4 H16 S4096 D128
    read 659 -> 206 MB from DRAM in the forward, 9% faster; where all K/V fit L2 (B8 H16 S1024
    D64, 34 MB) grouping was 3-7% slower."""
    return group if 2 * k.numel() * k.element_size() > l2_bytes(k.device) else 0
