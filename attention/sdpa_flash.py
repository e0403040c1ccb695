"""SDPA pinned to the FlashAttention backend: FlashAttention-2 bundled in PyTorch."""

from __future__ import annotations

import torch

from attention.rules import cuda_only
from attention.sdpa import sdpa_variant


def flash_cpu_or_cuda(device: str, dtype: torch.dtype) -> str | None:
    if device == "cpu":
        return None  # PyTorch has a CPU flash implementation
    return cuda_only("SDPA flash", half_only=True, min_cc=(8, 0))(device, dtype)


VARIANT = sdpa_variant(
    id="sdpa-flash",
    label="SDPA · FlashAttention backend",
    lesson=(
        "one fused FlashAttention-2 kernel; fastest though its occupancy reads low (255 "
        "registers/thread)"
    ),
    backward_lesson=(
        "FlashAttention-2's three kernels: dot_do_o (delta = rowsum(dO ∘ O)), dq_dk_dv (one "
        "pass over key blocks), convert_dq (FP32 dQ to bf16); it keeps only the log-sum-exp"
    ),
    backend="flash",
    unavailable=flash_cpu_or_cuda,
    compare_default="always",
)
