"""Our own Triton FlashAttention (attention/flash_triton), loaded through `kernels` from disk:
readable source next to the vendor kernels."""

from __future__ import annotations

import importlib.util
import os

import torch

from attention import hub
from attention.rules import HALF, kernels_installed
from attention.variant import Variant


def local_triton(device: str, dtype: torch.dtype) -> str | None:
    missing = kernels_installed()
    if missing:
        return missing
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


VARIANT = Variant(
    id="kernels-local-triton",
    label="FlashAttention in Triton, local kernels build",
    lesson=(
        "our own Triton FlashAttention loaded through kernels from disk: readable source next "
        "to the vendor kernels"
    ),
    backward_lesson=(
        "our Triton FlashAttention-2 backward, readable: _flash_bwd_preprocess (delta), "
        "_flash_bwd_dkdv (over key blocks; on Hopper _flash_bwd_dkdv_ws_kernel, written in "
        "Gluon with a producer warp feeding two warpgroups), _flash_bwd_dq"
    ),
    layout="bshd",
    build=hub.builder(hub.load_local_build),
    unavailable=local_triton,
    first_run="compiles",  # Triton compiles the kernel on its first call
    compare_default="where it runs",
)
