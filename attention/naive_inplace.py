"""Naive attention with the in-place `masked_fill_`: one character removes the Memcpy."""

from __future__ import annotations

from attention.naive import NO_MASK, builder
from attention.variant import Variant

VARIANT = Variant(
    id="naive-inplace",
    label="Naive, in-place masked_fill_",
    lesson="one character (masked_fill_) removes the Memcpy: one fewer GPU op per forward",
    backward_lesson=(
        "masked_fill_ is differentiable here: the scores it overwrites come from `* scale`, "
        "whose backward needs nothing saved; the backward is naive's, S² probabilities and "
        "all"
    ),
    layout="bhsd",
    build=builder(inplace=True),
    score_matrices=2,  # the scores, masked where they are, and the softmax
    backward_matrices=4,  # saved probabilities, their gradient, the scores' gradient, a copy
    lesson_without_mask=NO_MASK,
    compare_default="always",
)
