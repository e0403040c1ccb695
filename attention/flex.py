"""FlexAttention with a causal block mask, compiled by Inductor into one Triton kernel.

It compiles on its first call; the runner does that in warm-up so no compilation lands in the
profiled steps. Each build starts from a clean dynamo state so a long-running app never hits
the recompile limit and silently falls back to eager.
"""

from __future__ import annotations

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from attention.rules import compiler
from attention.variant import Built, Problem, Variant


def causal(
    batch: torch.Tensor, head: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
) -> torch.Tensor:
    """FlexAttention's mask_mod: a query sees the keys at or before it, in every batch and head."""
    return q_idx >= kv_idx


def shifted(offset: int, window: int | None):
    """The mask_mod for queries aligned bottom-right (`offset` = kv_len − q_len), with the last
    `window` keys only when a window is set (attention/masks.py's rule, as block-mask code)."""

    def mask_mod(batch, head, q_idx, kv_idx):
        seen = kv_idx <= q_idx + offset
        if window is not None:
            seen = seen & (kv_idx > q_idx + offset - window)
        return seen

    return mask_mod


def build(problem: Problem) -> Built:
    torch._dynamo.reset()
    q_len, kv_len, device = problem.queries, problem.seq_len, problem.device
    mask_mod = causal if problem.square else shifted(kv_len - q_len, problem.window)
    block_mask = (
        create_block_mask(mask_mod, B=None, H=None, Q_LEN=q_len, KV_LEN=kv_len, device=device)
        if problem.causal
        else None
    )
    flex = torch.compile(flex_attention, dynamic=False)
    gqa = problem.group > 1  # a block mask per K/V head group: no copies

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if gqa:
            return flex(q, k, v, block_mask=block_mask, enable_gqa=True)
        return flex(q, k, v, block_mask=block_mask)  # (B, nh, T, hs)

    generated = "Triton" if device == "cuda" else "C++"  # what Inductor generates there
    return Built(forward, f"torch.compile (Inductor, {generated})")


def backward_on_gpu(device: str, dtype: torch.dtype) -> str | None:
    """torch raises NotImplementedError for a FlexAttention backward on CPU."""
    return "FlexAttention has no backward on CPU (torch's own rule)" if device == "cpu" else None


VARIANT = Variant(
    id="flex",
    label="FlexAttention (compiled)",
    lesson="a causal block_mask compiled by Inductor into one Triton kernel",
    backward_lesson=(
        "Inductor generates the backward too, from the same block mask: a Triton template and"
        " a small reduction (torch has no FlexAttention backward on CPU)"
    ),
    layout="bhsd",
    build=build,
    unavailable=compiler("FlexAttention"),
    backward_unavailable=backward_on_gpu,
    warmup_calls=5,
    first_run="compiles",
)
