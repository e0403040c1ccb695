"""Naive causal attention, written out op by op as in the post's 04_a / 04_b scripts.

Five primitive ops, each one launch (or more) you can find in the trace. The out-of-place
`masked_fill` copies the whole score matrix first: that copy is the post's hidden Memcpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from attention.variant import Built, Problem, Variant


class NaiveCausalAttention(nn.Module):
    """matmul → scale → masked_fill(mask, -inf) → softmax → matmul, on (B, nh, T, hs) inputs."""

    def __init__(self, head_dim: int, inplace: bool = False) -> None:
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)
        self.inplace = inplace

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1))  # (B, nh, T, T)
        scores = scores * self.scale
        if mask is not None:
            if self.inplace:
                scores.masked_fill_(mask, float("-inf"))  # safe only under no_grad
            else:
                scores = scores.masked_fill(mask, float("-inf"))  # copies the scores
        attn = torch.softmax(scores, dim=-1)
        return torch.matmul(attn, v)  # (B, nh, T, hs)


def causal_mask(seq_len: int, device: torch.device | str) -> torch.Tensor:
    """True above the diagonal: the positions a query must not see. Built once per run."""
    return torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), diagonal=1)


def builder(inplace: bool) -> Callable[[Problem], Built]:
    """The naive forward for a problem, its mask built once, as in the post."""

    def build(problem: Problem) -> Built:
        module = NaiveCausalAttention(problem.head_dim, inplace=inplace)
        mask = causal_mask(problem.seq_len, problem.device) if problem.causal else None
        return Built(lambda q, k, v: module(q, k, v, mask), "eager")

    return build


# The naive lessons are about the mask: without it there is nothing to compare.
NO_MASK = (
    "With the causal mask off there is no masked_fill, so this variant and the other naive one "
    "run the same kernels: tick *Causal mask* to see the difference"
)

VARIANT = Variant(
    id="naive",
    label="Naive (out-of-place masked_fill)",
    lesson=(
        "matmul → scale → masked_fill → softmax → matmul; the out-of-place masked_fill hides a "
        "full Memcpy of the scores"
    ),
    backward_lesson=(
        "autograd runs the graph in reverse: softmax backward, four GEMMs (dP, dV, dQ, dK), "
        "the mask and the scale again, and it keeps the B·H·S² probabilities alive for it "
        "(257 MiB at the post's shape)"
    ),
    layout="bhsd",
    build=builder(inplace=False),
    score_matrices=3,  # the scores, their masked copy, the softmax (and the S² bool mask)
    backward_matrices=4,  # saved probabilities, their gradient, the scores' gradient, a copy
    lesson_without_mask=NO_MASK,
    compare_default="always",
)
