"""The "kernels" implementation: a kernels-hub FlashAttention as transformers loads it
(`attn_implementation="kernels-community/flash-attn2"`, run through transformers' varlen
path), or, when the Hub cannot be reached, this project's Triton FlashAttention
(attention/flash_triton, loaded by `kernels` from disk) registered through transformers'
`AttentionInterface` under FALLBACK, and said so.

The fallback has no varlen kernel: a padded batch is run one sequence at a time on its real
tokens (their keys are contiguous: right-padded for prefill, left-padded for decode), so no
FLOPs go to pads, at the cost of one launch per sequence. It has no soft-capping either.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from attention import hub as hub_module
from attention.variant import VariantUnavailable

REPO = "kernels-community/flash-attn2"
# no "flash" in the name: transformers would take it for a flash kernel to import
FALLBACK = "attnprof-triton-fa2"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resolved:
    attn_implementation: str  # what transformers is told
    source: str  # what ran: the Hub's kernel or the fallback
    note: str = ""  # why the Hub was not used


def hub() -> Resolved | None:
    """The Hub's FlashAttention as transformers will load it, or None: the Hub is unreachable
    (asked with a short connect, so an offline machine does not wait on kernels' retries)."""
    if not hub_module.hub_reachable():
        return None
    return Resolved(REPO, f"Hub {REPO} through transformers' flash_attention_forward (varlen)")


def fallback(softcap: float | None, reason: str) -> Resolved:
    """The Triton FlashAttention registered in transformers' AttentionInterface, with the
    reason the Hub's was not used; refused for a soft-capped model (it has none)."""
    if softcap is not None:
        raise VariantUnavailable(
            f"kernels: {reason}, and the fallback ({hub_module.LOCAL_BUILD_LABEL}) has no logit "
            f"soft-capping (this model's attn_logit_softcapping={softcap:g})"
        )
    kernel = hub_module.load_local_build()
    _register(kernel)
    return Resolved(
        FALLBACK,
        f"{kernel.source} registered through transformers' AttentionInterface as {FALLBACK!r}",
        f"Hub {REPO}: {reason}; one sequence at a time on its real tokens (no varlen kernel)",
    )


UNREACHABLE = "the Hugging Face Hub is unreachable from this machine"


def _register(kernel: hub_module.LoadedKernel) -> None:
    def forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                sliding_window=None, softcap=None, **kwargs):  # fmt: skip
        """transformers' attention call: (B, H, S, D) in, (B, S, H, D) out."""
        if softcap is not None:
            raise VariantUnavailable("the Triton FlashAttention fallback has no soft-capping")
        hub_module.check_head_dim(kernel, query.shape[-1])
        q, k, v = (t.transpose(1, 2) for t in (query, key, value))
        window = (sliding_window - 1, 0) if sliding_window else (-1, -1)

        def run(qs, ks, vs):
            out = kernel.flash_attn_func(
                q=qs, k=ks, v=vs, softmax_scale=scaling, causal=True, window_size=window
            )
            return out[0] if isinstance(out, tuple) else out

        if attention_mask is None:
            return run(q, k, v), None
        return _per_sequence(run, q, k, v, attention_mask.bool()), None

    AttentionInterface.register(FALLBACK, forward)
    AttentionMaskInterface.register(FALLBACK, flash_attention_mask)


def _per_sequence(run, q, k, v, mask: torch.Tensor) -> torch.Tensor:
    """Each sequence's real tokens alone; pad queries' rows stay zero."""
    out = torch.zeros_like(q)
    q_len = q.shape[1]
    for b in range(q.shape[0]):
        keys = mask[b].nonzero().flatten()
        queries = mask[b, -q_len:].nonzero().flatten()
        if not len(keys) or not len(queries):
            continue
        first, last = int(keys[0]), int(keys[-1]) + 1
        q_first, q_last = int(queries[0]), int(queries[-1]) + 1
        out[b : b + 1, q_first:q_last] = run(
            q[b : b + 1, q_first:q_last], k[b : b + 1, first:last], v[b : b + 1, first:last]
        )
    return out
