"""FlashAttention-3 (Hopper's wgmma and TMA), loaded from the Hub with `kernels`."""

from __future__ import annotations

from attention import hub
from attention.rules import kernels_hub
from attention.variant import Variant

REPO = "kernels-community/flash-attn3"

VARIANT = Variant(
    id="kernels-flash-attn3",
    label="FlashAttention-3 from the kernels Hub (Hopper)",
    lesson="FlashAttention-3: Hopper's wgmma and TMA, loaded from the Hub",
    backward_lesson=(
        "the loaded build's backward; offline, our Triton FlashAttention-2 backward "
        "(attention/flash_triton): delta, dK/dV over key blocks, dQ"
    ),
    layout="bshd",
    build=hub.builder(lambda: hub.load(REPO)),
    unavailable=kernels_hub(REPO, ((8, 0), (9, 0))),
    first_run="downloads",
    compare_default="where it runs",
)
