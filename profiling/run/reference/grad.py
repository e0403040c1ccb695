"""How far a run's dQ, dK and dV are from attention's gradients computed in float64.

Like the output's check (profiling.run.reference.check) it never holds the S² matrix whole: it
walks groups of (batch, head) pairs and, inside a group, chunks of query rows, recomputing each
chunk's probabilities P and applying the backward by hand (as FlashAttention does):
dV += Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(dO∘O)), dQ = dS·K·scale, dK += dSᵀ·Q·scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from profiling.run.reference.check import REFERENCE_FLOPS, causal_bias, kv_pairs
from profiling.workload.memory import GRADIENT_CHUNK, reference_chunk
from profiling.workload.spec import Workload

NAMES = ("dq", "dk", "dv")
BACKWARD_WORK = 3.0  # the reference's backward chunk does about 3× a forward chunk's matmuls


@torch.no_grad()  # q, k, v require grad: no graph may hold the chunks' matrices
def gradient_errors(
    tensors: dict[str, torch.Tensor], workload: Workload, layout: str, device: str
) -> Callable[[], tuple[dict[str, float], str]]:
    """‖d − ref‖ / ‖ref‖ for each of dQ, dK, dV; queued now, read by the returned function."""
    names = ("q", "k", "v", "grad_out", *NAMES)
    q, k, v, grad_out, dq, dk, dv = (tensors[name] for name in names)
    if layout == "bshd":
        q, k, v, grad_out, dq, dk, dv = (x.transpose(1, 2) for x in (q, k, v, grad_out, dq, dk, dv))
    batch, heads, q_len, head_dim = q.shape
    kv_heads, seq_len = k.shape[1], k.shape[2]
    pairs, per_kv = batch * heads, heads // kv_heads
    work = BACKWARD_WORK * 4.0 * q_len * seq_len * head_dim
    keep = max(1, min(pairs, int(REFERENCE_FLOPS[device] // work)))
    keep = -(-keep // per_kv) * per_kv  # whole K/V groups: a dK sums over its query heads
    queries = [x.detach().reshape(pairs, q_len, head_dim)[:keep] for x in (q, grad_out)]
    keys = [x.detach().reshape(batch * kv_heads, seq_len, head_dim) for x in (k, v)]
    got_dq = dq.reshape(pairs, q_len, head_dim)[:keep]
    got_kv = [x.reshape(batch * kv_heads, seq_len, head_dim) for x in (dk, dv)]
    kv_pair = kv_pairs(keep, heads, kv_heads, q.device)
    rows, group = reference_chunk(seq_len, keep, GRADIENT_CHUNK, q_len)
    group = max(per_kv, group // per_kv * per_kv)  # chunks of whole K/V groups too
    sums: torch.Tensor | None = None  # per gradient: ‖d − ref‖², ‖ref‖²
    for first in range(0, keep, group):
        part = slice(first, first + group)
        own = kv_pair[part][::per_kv]  # the K/V pairs this chunk's query heads read
        chunk = _group_errors(
            [queries[0][part], keys[0][kv_pair[part]], keys[1][kv_pair[part]], queries[1][part]],
            [got_dq[part], got_kv[0][own], got_kv[1][own]],
            rows,
            workload,
        )
        sums = chunk if sums is None else sums + chunk
    note = "all heads" if keep == pairs else f"{keep} of {pairs} (batch, head) pairs"
    assert sums is not None

    def finish() -> tuple[dict[str, float], str]:
        values = sums.tolist()
        errors = {
            name: math.sqrt(error / reference) if reference > 0 else float("nan")
            for name, (error, reference) in zip(NAMES, values, strict=True)
        }
        return errors, note

    return finish


def _group_errors(
    inputs: list[torch.Tensor], got: list[torch.Tensor], rows: int, workload: Workload
) -> torch.Tensor:
    """(3, 2) sums of squares for one group of query pairs (whole K/V groups): its dQ row by
    row; dK and dV at the end, each K/V head's summed over the query heads that read it."""
    q, k, v, grad_out = (x.to(torch.float64) for x in inputs)
    dq, dk, dv = got
    q_len, seq_len, head_dim = q.shape[1], k.shape[1], q.shape[2]
    scale = head_dim**-0.5
    ref_dk, ref_dv = torch.zeros_like(k), torch.zeros_like(v)
    dq_sums = torch.zeros(2, dtype=torch.float64, device=q.device)
    for first_row in range(0, q_len, rows):
        last_row = min(q_len, first_row + rows)
        span = slice(first_row, last_row)
        bias = causal_bias(first_row, last_row, q_len, seq_len, workload, q.device)
        scores = torch.baddbmm(bias, q[:, span], k.transpose(1, 2), alpha=scale)
        probabilities = torch.softmax(scores, dim=-1)  # (G, R, S)
        del scores
        out_rows, grad_rows = probabilities @ v, grad_out[:, span]  # (G, R, D)
        delta = (grad_rows * out_rows).sum(-1, keepdim=True)  # (G, R, 1)
        ref_dv += probabilities.transpose(1, 2) @ grad_rows
        grad_scores = probabilities * (grad_rows @ v.transpose(1, 2) - delta)  # dS (G, R, S)
        ref_dq = (grad_scores @ k) * scale
        ref_dk += (grad_scores.transpose(1, 2) @ q[:, span]) * scale
        dq_sums += _squares(dq[:, span], ref_dq)
    per_kv = q.shape[0] // dk.shape[0]
    ref_dk, ref_dv = (
        x.view(dk.shape[0], per_kv, seq_len, head_dim).sum(1) for x in (ref_dk, ref_dv)
    )
    return torch.stack([dq_sums, _squares(dk, ref_dk), _squares(dv, ref_dv)])


def _squares(got: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    difference = (got.to(torch.float64) - reference).reshape(-1)
    reference = reference.reshape(-1)
    return torch.stack([torch.dot(difference, difference), torch.dot(reference, reference)])
