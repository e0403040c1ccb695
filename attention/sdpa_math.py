"""SDPA pinned to the math backend: the reference path, written in aten ops."""

from __future__ import annotations

from attention.sdpa import sdpa_variant

VARIANT = sdpa_variant(
    id="sdpa-math",
    label="SDPA · math backend",
    lesson=(
        "the reference path: upcasts to FP32 (no tensor cores), rebuilds the causal mask every "
        "call, ~20 kernels per forward"
    ),
    backward_lesson=(
        "the math backend's autograd graph, in FP32: a dozen kernels and four FP32 S² "
        "matrices at the backward's peak"
    ),
    backend="math",
    score_matrices=3,
    backward_matrices=5,  # FP32: measured 4.2 B·H·S² matrices at the backward's peak (H200)
    upcasts=True,
    compare_default="always",
)
