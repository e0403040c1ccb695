"""Naive causal attention, written out op by op as in the post's 04_a / 04_b scripts.

Five primitive ops, each one launch (or more) you can find in the trace. The out-of-place
`masked_fill` copies the whole score matrix first: that copy is the post's hidden Memcpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from attention.masks import visible
from attention.variant import Built, Problem, Variant


class NaiveCausalAttention(nn.Module):
    """matmul → scale → masked_fill(mask, -inf) → softmax → matmul, on (B, nh, T, hs) inputs.

    With grouped-query attention (`group` query heads per K/V head) K and V are first copied
    out to one head per query head: the copies are the naive way, and they show in the trace."""

    def __init__(self, head_dim: int, inplace: bool = False, group: int = 1) -> None:
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)
        self.inplace = inplace
        self.group = group

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        if self.group > 1:  # (B, n_kv, S, hs) → (B, nh, S, hs): each K/V head copied per group
            k = k.repeat_interleave(self.group, dim=1)
            v = v.repeat_interleave(self.group, dim=1)
        scores = torch.matmul(q, k.transpose(-2, -1))  # (B, nh, T, S)
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


def problem_mask(problem: Problem) -> torch.Tensor | None:
    """True where a query must not see a key (None: it sees all): the post's triu for square
    causal attention, else attention/masks.py's bottom-right rule with its window."""
    if problem.queries == problem.seq_len and problem.window is None:
        return causal_mask(problem.seq_len, problem.device) if problem.causal else None
    seen = visible(
        0, problem.queries, problem.queries, problem.seq_len, problem.causal, problem.window,
        problem.device,
    )  # fmt: skip
    return None if seen is None else ~seen


def builder(inplace: bool) -> Callable[[Problem], Built]:
    """The naive forward for a problem, its mask built once, as in the post."""

    def build(problem: Problem) -> Built:
        module = NaiveCausalAttention(problem.head_dim, inplace=inplace, group=problem.group)
        mask = problem_mask(problem)
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
