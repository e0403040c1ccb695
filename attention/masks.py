"""Which keys a query may see: the one definition every variant and the float64 reference use.

Queries are aligned bottom-right with the keys, as FlashAttention (≥ 2.1) and SDPA's
`causal_lower_right` do: with q_len queries against kv_len keys, query i sits at position
i + kv_len − q_len, so the last query sees every key (a decode step against its KV cache). SDPA's
`is_causal=True` aligns top-left instead, which differs only when q_len ≠ kv_len.

    causal:  key j ≤ i + offset                      (offset = kv_len − q_len)
    window:  key j > i + offset − window              (the last `window` keys, Mistral-style)
"""

from __future__ import annotations

import numpy as np
import torch

BOTTOM_RIGHT = (
    "causal with fewer queries than keys is aligned bottom-right: the last query sees every key "
    "(SDPA's is_causal=True aligns top-left, a different attention: the float64 reference "
    "would show it as an error)"
)


def visible(
    first_row: int,
    last_row: int,
    q_len: int,
    kv_len: int,
    causal: bool,
    window: int | None,
    device: torch.device | str,
) -> torch.Tensor | None:
    """(rows, kv_len) bool, True where query i ∈ [first_row, last_row) may see key j; None when
    every query sees every key (no mask needed)."""
    if not causal and window is None:
        return None
    position = torch.arange(first_row, last_row, device=device)[:, None] + (kv_len - q_len)
    keys = torch.arange(kv_len, device=device)[None, :]
    seen = keys <= position if causal else torch.ones_like(keys <= position)
    if window is not None:
        seen &= keys > position - window
    return seen


def visible_pairs(q_len: int, kv_len: int, causal: bool, window: int | None) -> int:
    """How many (query, key) pairs `visible` allows, counted without building the mask."""
    position = np.arange(q_len, dtype=np.int64) + (kv_len - q_len)
    last = np.minimum(kv_len - 1, position) if causal else np.full(q_len, kv_len - 1)
    first = np.maximum(0, position - window + 1) if window is not None else np.zeros(q_len)
    return int(np.maximum(0, last - first + 1).sum())
