"""How far a variant's output is from attention computed in float64: the run's "rel. err".

The reference never holds the S² score matrix: it works in chunks of query rows and groups
of (batch, head) pairs, sized by the memory the memory check left spare (the memory estimate
counts the same chunk, profiling.workload.memory.reference_chunk).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attention.masks import visible
from profiling.workload.memory import REFERENCE_CHUNK, reference_chunk
from profiling.workload.spec import Workload

REFERENCE_FLOPS = {"cuda": 2e12, "cpu": 4e9}  # float64 work we allow the reference, per device


@torch.no_grad()  # a train run's q, k, v require grad: no graph may hold the chunks' scores
def relative_error(
    tensors: dict[str, torch.Tensor], workload: Workload, layout: str, device: str, spare: int = 0
) -> Callable[[], tuple[float, str]]:
    """‖out − ref‖ / ‖ref‖ against float64 attention, in chunks that never hold the S² matrix.

    Batched over (batch, head) pairs with sums kept on the device: one sync, not one per
    chunk. A chunk grows with the `spare` bytes the memory check left over, up to 1 GiB of
    scores: each chunk costs about a dozen launches whatever its size (docs/performance.md).
    The work is queued here and the returned function reads the result, so the caller can
    parse the trace in between.
    """
    out, q, k, v = (tensors[name] for name in ("out", "q", "k", "v"))
    if layout == "bshd":
        out, q, k, v = (x.transpose(1, 2) for x in (out, q, k, v))
    batch, heads, q_len, head_dim = q.shape
    kv_heads, seq_len = k.shape[1], k.shape[2]
    pairs = batch * heads
    keep = max(1, min(pairs, int(REFERENCE_FLOPS[device] // (4.0 * q_len * seq_len * head_dim))))
    out, q = (x.reshape(pairs, q_len, head_dim)[:keep] for x in (out, q))
    k, v = (x.reshape(batch * kv_heads, seq_len, head_dim) for x in (k, v))
    # query pair → its K/V head's pair (grouped heads only: MHA slices k and v as they are)
    kv_pair = kv_pairs(keep, heads, kv_heads, q.device) if kv_heads != heads else None
    # float64 scores per chunk; the chunk also holds their softmax and float64 copies of its
    # q, k, v and out, under 3x the scores' bytes in all
    budget = int(min(REFERENCE_CHUNK[1], max(REFERENCE_CHUNK[0], spare // (3 * 8))))
    rows, group = reference_chunk(seq_len, keep, budget, q_len)  # the estimate counts this chunk
    # The loop's names keep the last chunk's tensors alive into the next one, as
    # memory_estimate.reference_bytes counts them: keep them in one scope.
    sums: torch.Tensor | None = None  # ‖out − ref‖², ‖ref‖² (no zeros to start: one launch)
    for first_row in range(0, q_len, rows):
        last_row = min(q_len, first_row + rows)
        bias = causal_bias(first_row, last_row, q_len, seq_len, workload, q.device)
        for first_pair in range(0, keep, group):
            pair_rows = slice(first_pair, first_pair + group)
            out_rows, q_rows = (
                x[pair_rows, first_row:last_row].to(torch.float64) for x in (out, q)
            )
            kv_rows = pair_rows if kv_pair is None else kv_pair[pair_rows]
            k_pairs, v_pairs = (x[kv_rows].to(torch.float64) for x in (k, v))
            scores = torch.baddbmm(bias, q_rows, k_pairs.transpose(1, 2), alpha=head_dim**-0.5)
            result = torch.bmm(torch.softmax(scores, dim=-1), v_pairs)  # (G, rows, D)
            difference, result = (out_rows - result).reshape(-1), result.reshape(-1)
            part = torch.stack([torch.dot(difference, difference), torch.dot(result, result)])
            sums = part if sums is None else sums + part
    note = (
        "all heads"
        if keep == pairs
        else f"{keep} of {pairs} (batch, head) pairs, to bound the cost"
    )
    assert sums is not None  # at least one chunk: seq_len, keep ≥ 1

    def finish() -> tuple[float, str]:  # the ratio on the host: four fewer launches
        error, reference = sums.tolist()
        ratio = math.sqrt(error / reference) if reference > 0 else float("nan")  # no ‖ref‖
        return ratio, note

    return finish


def causal_bias(
    first_row: int, last_row: int, q_len: int, seq_len: int, workload: Workload, device
) -> torch.Tensor:
    """The additive float64 mask for these query rows: -inf where attention/masks.py says a
    query does not see a key (bottom-right causal, a window), 0 elsewhere."""
    shape = (last_row - first_row, seq_len)
    if workload.window is None and q_len == seq_len:  # square: the triangle, no bool temporaries
        if not workload.causal:
            return torch.zeros(shape, dtype=torch.float64, device=device)
        return torch.full(shape, float("-inf"), dtype=torch.float64, device=device).triu_(
            first_row + 1
        )
    seen = visible(first_row, last_row, q_len, seq_len, workload.causal, workload.window, device)
    if seen is None:  # a full, unwindowed attention of q_len ≠ seq_len
        return torch.zeros(shape, dtype=torch.float64, device=device)
    bias = torch.zeros(shape, dtype=torch.float64, device=device)
    return bias.masked_fill_(~seen, float("-inf"))


def kv_pairs(pairs: int, heads: int, kv_heads: int, device) -> torch.Tensor:
    """For query pairs b·heads + h, the pair of their K/V head: b·kv_heads + h // group."""
    index = torch.arange(pairs, device=device)
    return (index // heads) * kv_heads + (index % heads) // (heads // kv_heads)
