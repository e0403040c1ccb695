"""SDPA pinned to the cuDNN backend: one kernel cuDNN generates for the problem."""

from __future__ import annotations

from attention.rules import cuda_only
from attention.sdpa import sdpa_variant

VARIANT = sdpa_variant(
    id="sdpa-cudnn",
    label="SDPA · cuDNN backend",
    lesson=(
        "one kernel cuDNN generates for this problem; the cost moves to a fat CPU bar (plan "
        "selection) and a cuLaunchKernelEx"
    ),
    backward_lesson=(
        "cuDNN's generated bprop kernel and its two helpers (dO·O per row, dQ to 16 bits): "
        "the fastest backward on Hopper"
    ),
    backend="cudnn",
    unavailable=cuda_only("SDPA cuDNN", half_only=True, min_cc=(8, 0)),
    compare_default="always",
)
