"""SDPA unpinned: PyTorch picks the backend, and the trace shows which one it chose."""

from __future__ import annotations

from attention.sdpa import sdpa_variant

VARIANT = sdpa_variant(
    id="sdpa-auto",
    label="SDPA (PyTorch picks the backend)",
    lesson="F.scaled_dot_product_attention unpinned: the trace shows which backend PyTorch chose",
    backward_lesson=("the backward of whichever backend SDPA picked (the trace shows which)"),
    backend=None,
    score_matrices=3,  # estimated as the math backend, the largest it may pick
    backward_matrices=5,
    upcasts=True,
)
