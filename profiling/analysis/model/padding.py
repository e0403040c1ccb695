"""What a ragged batch's padding costs: the pad tokens, and the FLOPs spent on them.

Transformers pads the hidden states, so the projections', MLP's and LM head's GEMMs run over
every one of the B·S positions whatever the attention does. Attention's own work depends on
the implementation (`pairs`, one sequence of `n` real tokens padded to S, prefill):

- eager and SDPA's math backend multiply the full S×S square (the mask is added after);
- SDPA's fused backends get `is_causal` and compute the causal half when nothing is padded,
  but a padded batch hands them the mask instead, and they compute the full square;
- flex's block mask skips the pad keys, but pad queries still see the real keys:
  n(n+1)/2 + (S−n)·n (whole blocks; a partial block's leftover is under one block a row);
- the kernels-hub FlashAttention runs transformers' varlen path (the Triton fallback runs each
  sequence's real tokens alone): n(n+1)/2, nothing on pads.

The sliding window is left out of these counts (every preset's window is at least 4096).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FULL_SQUARE = ("eager", "sdpa-math")
VARLEN = ("kernels",)
BLOCK_MASK = ("flex_attention",)


@dataclass(frozen=True)
class Shape:
    """A decoder's sizes, as the FLOP counts need them."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    layers: int


def causal_pairs(queries: int, keys: int) -> int:
    """(query, key) pairs a causal mask keeps, queries aligned to the keys' end."""
    queries = min(queries, keys)
    return queries * (keys - queries) + queries * (queries + 1) // 2


def pairs(implementation: str, seq_len: int, length: int, padded: bool) -> int:
    """The (query, key) pairs `implementation` computes for one sequence (module docstring)."""
    if implementation in FULL_SQUARE:
        return seq_len * seq_len
    if implementation in VARLEN:
        return causal_pairs(length, length)
    if implementation in BLOCK_MASK:
        return causal_pairs(length, length) + (seq_len - length) * length
    return seq_len * seq_len if padded else causal_pairs(seq_len, seq_len)


def attention_flops(shape: Shape, computed_pairs: int) -> float:
    """QKᵀ and PV over `computed_pairs`, every head of every layer: 4·d FLOPs a pair."""
    return 4.0 * computed_pairs * shape.head_dim * shape.heads * shape.layers


def dense_flops(shape: Shape, tokens: int) -> float:
    """The projections', MLP's and LM head's matrix products over `tokens` positions."""
    projections = shape.hidden * shape.head_dim * (2 * shape.heads + 2 * shape.kv_heads)
    mlp = 3 * shape.hidden * shape.intermediate
    return 2.0 * tokens * (shape.layers * (projections + mlp) + shape.hidden * shape.vocab)


def forward_flops(shape: Shape, batch: int, queries: int, keys: int) -> float:
    """One forward of `batch` sequences, `queries` new positions against `keys`, causal."""
    return batch * (
        dense_flops(shape, queries) + attention_flops(shape, causal_pairs(queries, keys))
    )


@dataclass(frozen=True)
class PadFigures:
    """One implementation's padding cost for one prefill."""

    implementation: str
    pad_tokens: int
    tokens: int
    pad_flops: float  # FLOPs spent beyond the real tokens' own (dense on pads, attention's)
    flops: float  # all the forward's FLOPs under this implementation

    @property
    def pad_share(self) -> float:
        return self.pad_flops / self.flops if self.flops else 0.0


def pad_figures(
    shape: Shape, seq_len: int, lengths: Sequence[int], implementation: str
) -> PadFigures:
    """Pads and the FLOPs they cost under `implementation`, for a prefill of `lengths`
    padded to `seq_len`."""
    padded = any(n < seq_len for n in lengths)
    tokens = len(lengths) * seq_len
    pads = tokens - sum(lengths)
    computed = sum(pairs(implementation, seq_len, n, padded) for n in lengths)
    needed = sum(causal_pairs(n, n) for n in lengths)
    attention = attention_flops(shape, computed)
    wasted = dense_flops(shape, pads) + attention - attention_flops(shape, needed)
    return PadFigures(implementation, pads, tokens, wasted, dense_flops(shape, tokens) + attention)
