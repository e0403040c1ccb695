"""Compiled attention: FlexAttention with a causal block mask, and torch.compile(naive in-place).

Both compile on their first call; the runner does that in warm-up so no compilation lands in
the profiled steps. Each build starts from a clean dynamo state so a long-running app never
hits the recompile limit and silently falls back to eager.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from attention.naive import NaiveCausalAttention, causal_mask


def causal(
    b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
) -> torch.Tensor:
    return q_idx >= kv_idx


def build_flex(seq_len: int, is_causal: bool, device: str) -> Callable[..., torch.Tensor]:
    torch._dynamo.reset()
    block_mask = (
        create_block_mask(causal, B=None, H=None, Q_LEN=seq_len, KV_LEN=seq_len, device=device)
        if is_causal
        else None
    )
    flex = torch.compile(flex_attention, dynamic=False)

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return flex(q, k, v, block_mask=block_mask)  # (B, nh, T, hs)

    return forward


def build_compiled_naive(
    head_dim: int, seq_len: int, is_causal: bool, device: str
) -> Callable[..., torch.Tensor]:
    torch._dynamo.reset()
    module = torch.compile(NaiveCausalAttention(head_dim, inplace=True), dynamic=False)
    mask = causal_mask(seq_len, device) if is_causal else None

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return module(q, k, v, mask)

    return forward
