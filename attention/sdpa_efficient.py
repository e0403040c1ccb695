"""SDPA pinned to the memory-efficient backend: xformers' cutlass kernel."""

from __future__ import annotations

from attention.rules import cuda_only
from attention.sdpa import sdpa_variant

VARIANT = sdpa_variant(
    id="sdpa-efficient",
    label="SDPA · memory-efficient backend",
    lesson="one fused kernel: fmha_cutlassF, the xformers memory-efficient attention",
    backward_lesson=(
        "CUTLASS's fmha_cutlassB recomputes the probabilities block by block from the saved "
        "log-sum-exp: nothing S²-sized is kept"
    ),
    backend="efficient",
    unavailable=cuda_only("SDPA efficient"),
    compare_default="always",
)
