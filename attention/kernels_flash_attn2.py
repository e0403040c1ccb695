"""FlashAttention-2, pre-built and version-pinned, loaded from the Hub with `kernels`."""

from __future__ import annotations

from attention import hub
from attention.rules import kernels_hub
from attention.variant import Variant

REPO = "kernels-community/flash-attn2"

VARIANT = Variant(
    id="kernels-flash-attn2",
    label="FlashAttention-2 from the kernels Hub",
    lesson=(
        "a pre-built, version-pinned FlashAttention loaded with kernels.get_kernel, in its own "
        "[batch, seq, heads, dim] layout"
    ),
    backward_lesson=(
        "the loaded build's backward; offline, our Triton FlashAttention-2 backward "
        "(attention/flash_triton): delta, dK/dV over key blocks, dQ"
    ),
    layout="bshd",
    build=hub.builder(lambda: hub.load(REPO)),
    unavailable=kernels_hub(REPO, ((8, 0), (9, 0), (10, 0), (12, 0))),
    first_run="downloads",
    compare_default="where it runs",
)
