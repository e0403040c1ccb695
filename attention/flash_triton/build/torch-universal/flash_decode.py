"""Split-KV decode (flash-decoding) for short queries against a long K/V cache.

A decode step has q_len 1..64, so the forward's grid (batch x heads x query tiles) holds too
few programs to fill the GPU, each streaming the whole cache. Here the cache is cut into
chunks processed in parallel (`_flash_decode_partial`: a normalised partial output and a
log-sum-exp per chunk and row), then `_flash_decode_combine` merges the chunks per row. The
query heads of one K/V head are packed into the rows of one tile, so each K/V tile is read
once per group, not once per query head.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from .flash_common import (
    INTERPRET,
    Window,
    check_inputs,
    device_scope,
    resolve_scale,
    resolve_window,
    upcast_dot,
)
from .flash_fwd import _attend_range

DECODE_MAX_Q = 64  # longer queries fill the GPU through the forward's query tiles
MIN_KEYS_PER_SPLIT = 512  # shorter chunks: the partial writes and the combine start to count
CHUNK_ALIGN = 128  # chunk starts on a multiple of every BLOCK_N the partial kernel takes
CTAS_PER_SM = 8  # partial programs to aim for per SM: several waves, so a short tail
MAX_SPLITS = 128
H200_SMS = 132  # stands in for the SM count on CPU (interpreter), so plans match the H200


@dataclass(frozen=True)
class DecodeConfig:
    """A fixed decode launch (tests, benchmarks): None = chosen (splits) or autotuned (tiles)."""

    num_splits: int | None = None
    block_n: int | None = None
    num_warps: int = 4
    num_stages: int = 3


@dataclass(frozen=True)
class DecodePlan:
    """Rows of a tile (a group's heads x query positions), and how the cache is cut."""

    block_m: int
    row_tiles: int
    kv_lo: int  # first key any row sees, rounded down to CHUNK_ALIGN
    chunk: int  # keys per split, a multiple of CHUNK_ALIGN
    num_splits: int


@functools.cache
def sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return H200_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def plan_decode(
    q: torch.Tensor, k: torch.Tensor, window: Window, num_splits: int | None
) -> DecodePlan | None:
    """The launch plan, or None when no row sees any key. Splits (unless given): enough
    programs for CTAS_PER_SM per SM over batch x kv_heads x row tiles, each chunk at least
    MIN_KEYS_PER_SPLIT keys of the span the rows see (a window's span, not the whole cache)."""
    batch, seqlen_q, n_heads, _ = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    rows = seqlen_q * (n_heads // kv_heads)
    block_m = min(64, max(16, triton.next_power_of_2(rows)))
    row_tiles = triton.cdiv(rows, block_m)
    span_lo = max(0, window.lo_diag)  # row 0's first key
    span_hi = min(seqlen_k, seqlen_q + window.hi_diag)  # past the last row's last key
    if span_hi <= span_lo:
        return None
    kv_lo = span_lo // CHUNK_ALIGN * CHUNK_ALIGN
    span = span_hi - kv_lo
    if num_splits is None:
        want = triton.cdiv(CTAS_PER_SM * sm_count(q.device), batch * kv_heads * row_tiles)
        num_splits = min(want, span // MIN_KEYS_PER_SPLIT, MAX_SPLITS)
    units = triton.cdiv(span, CHUNK_ALIGN)
    chunk = triton.cdiv(units, max(1, min(num_splits, units))) * CHUNK_ALIGN
    return DecodePlan(block_m, row_tiles, kv_lo, chunk, triton.cdiv(span, chunk))


def use_decode_path(q: Any, k: Any, causal: bool, window_size: Any) -> bool:
    """True for a short query whose plan cuts the cache in two or more chunks."""
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)):
        return False  # the forward's checks name the problem
    if q.dim() != 4 or k.dim() != 4 or q.shape[1] > DECODE_MAX_Q:
        return False
    if k.shape[1] < 2 * MIN_KEYS_PER_SPLIT or k.shape[2] < 1 or q.shape[2] % k.shape[2]:
        return False
    plan = plan_decode(q, k, resolve_window(window_size, causal, q.shape[1], k.shape[1]), None)
    return plan is not None and plan.num_splits >= 2


@triton.jit(
    do_not_specialize=[
        "seqlen_q", "seqlen_k", "kv_heads", "group", "lo_diag", "hi_diag", "kv_lo", "chunk",
        "num_splits", "kv_bucket",
    ]
)  # fmt: skip
def _flash_decode_partial(
    Q, K, V, OPart, LsePart, softmax_scale, seqlen_q, seqlen_k, kv_heads, group,
    lo_diag, hi_diag, kv_lo, chunk, num_splits,
    stride_qb, stride_qs, stride_qh, stride_qd, stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd, kv_bucket,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, UPCAST_DOT: tl.constexpr,
):  # fmt: skip
    """One program = one (batch, K/V head) x BLOCK_M packed rows x one chunk of keys.

    Row r is query position r // group of query head kv_head * group + r % group. Writes the
    chunk's normalised output (fp32 [B, H, q_len, splits, D]) and log2-sum-exp (fp32
    [B, H, q_len, splits], -inf where the row sees no key of the chunk).
    """
    pid_bk = tl.program_id(0)
    r0 = tl.program_id(1) * BLOCK_M
    split = tl.program_id(2)
    b = (pid_bk // kv_heads).to(tl.int64)
    kv_h = pid_bk % kv_heads
    rows = r0 + tl.arange(0, BLOCK_M)
    n_rows = seqlen_q * group
    row_ok = rows < n_rows
    pos = rows // group  # (BLOCK_M,) query positions
    head = kv_h * group + rows % group  # (BLOCK_M,) query heads
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + b * stride_qb + (pos.to(tl.int64) * stride_qs + head.to(tl.int64) * stride_qh)
    q = tl.load(q_ptrs[:, None] + offs_d[None, :] * stride_qd, mask=row_ok[:, None], other=0.0)
    k_base = K + b * stride_kb + kv_h.to(tl.int64) * stride_kh
    v_base = V + b * stride_vb + kv_h.to(tl.int64) * stride_vh
    c0 = kv_lo + split * chunk
    last = (tl.minimum(r0 + BLOCK_M, n_rows) - 1) // group
    acc, l_i, m_i = _attend_range(
        q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        pos, r0 // group, last, c0, c0 + chunk, seqlen_k, lo_diag, hi_diag,
        softmax_scale * 1.4426950408889634, HEAD_DIM, BLOCK_M, BLOCK_N,
        CAUSAL, WINDOW, True, True, UPCAST_DOT,
    )  # fmt: skip
    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]  # 0 where the chunk held no visible key
    lse2 = tl.where(empty, float("-inf"), m_i + tl.math.log2(l_i))
    n_heads = kv_heads * group
    idx = ((b * n_heads + head) * seqlen_q + pos) * num_splits + split  # int64 (b is)
    tl.store(OPart + idx[:, None] * HEAD_DIM + offs_d[None, :], out, mask=row_ok[:, None])
    tl.store(LsePart + idx, lse2, mask=row_ok)


@triton.jit(do_not_specialize=["num_splits", "seqlen_q", "n_heads"])
def _flash_decode_combine(
    OPart, LsePart, Out, num_splits, seqlen_q, n_heads,
    stride_ob, stride_os, stride_oh, stride_od,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """One program = one output row (batch, head, position): the chunks' outputs weighted by
    2^(lse_s - max), over their sum; 0 for a row that saw no key in any chunk."""
    row = tl.program_id(0).to(tl.int64)  # ((b * n_heads + h) * seqlen_q + pos)
    pos = row % seqlen_q
    h = (row // seqlen_q) % n_heads
    b = row // seqlen_q // n_heads
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = offs_s < num_splits
    lse2 = tl.load(LsePart + row * num_splits + offs_s, mask=s_ok, other=float("-inf"))
    m = tl.max(lse2, 0)
    w = tl.math.exp2(lse2 - tl.where(m == float("-inf"), 0.0, m))  # (BLOCK_S,), 0 if empty
    o_ptrs = OPart + (row * num_splits + offs_s)[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(o_ptrs, mask=s_ok[:, None], other=0.0)  # (BLOCK_S, D)
    total = tl.sum(w, 0)
    out = tl.sum(o * w[:, None], 0) / tl.where(total == 0.0, 1.0, total)  # (D,)
    o_base = Out + b * stride_ob + pos * stride_os + h * stride_oh
    tl.store(o_base + offs_d * stride_od, out.to(Out.dtype.element_ty))


def _partial_configs() -> list[triton.Config]:
    # (BLOCK_N, num_warps, num_stages): memory-bound loops, so deep pipelines of K/V tiles.
    shapes = [(64, 4, 3), (64, 4, 4), (128, 4, 3), (128, 8, 3), (32, 4, 4), (64, 8, 4)]
    return [triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=s) for n, w, s in shapes]


def _prune_partial(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    """Drop configs whose K and V stages pass ~200 KB of shared memory (head_dim 256)."""
    head_dim = {**named_args, **kwargs}["HEAD_DIM"]
    kept = [c for c in configs if 4 * c.kwargs["BLOCK_N"] * head_dim * c.num_stages <= 200_000]
    return kept or [triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=2)]


_flash_decode_partial_autotuned = triton.autotune(
    configs=_partial_configs(),
    key=["kv_bucket", "HEAD_DIM", "BLOCK_M", "CAUSAL", "WINDOW"],  # + tensors' dtypes
    prune_configs_by={"early_config_prune": _prune_partial},
)(_flash_decode_partial)


def flash_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    config: DecodeConfig | None = None,
) -> torch.Tensor:
    """Attention as flash_attn_func computes it (same masks, same conventions), through the
    split-KV kernels; inference only."""
    check_inputs(q, k, v, softmax_scale, window_size)
    config = config or DecodeConfig()
    batch, seqlen_q, n_heads, head_dim = q.shape
    window = resolve_window(window_size, causal, seqlen_q, k.shape[1])
    out = torch.zeros(q.shape, dtype=q.dtype, device=q.device)  # rows that see no key stay 0
    plan = plan_decode(q, k, window, config.num_splits) if out.numel() else None
    if plan is None:
        return out
    o_part = torch.empty(
        (batch, n_heads, seqlen_q, plan.num_splits, head_dim), dtype=torch.float32, device=q.device
    )
    lse_part = torch.empty(o_part.shape[:-1], dtype=torch.float32, device=q.device)
    kv_heads = k.shape[2]
    meta: dict[str, Any] = {"HEAD_DIM": head_dim, "BLOCK_M": plan.block_m, "CAUSAL": causal}
    meta.update(WINDOW=window.windowed, UPCAST_DOT=upcast_dot(q.dtype))
    kernel = _flash_decode_partial_autotuned
    if config.block_n is not None or INTERPRET:  # the interpreter would time every config
        kernel = _flash_decode_partial
        meta.update(BLOCK_N=config.block_n or 64, num_warps=config.num_warps)
        meta.update(num_stages=config.num_stages)
    args = (
        q, k, v, o_part, lse_part, resolve_scale(softmax_scale, head_dim), seqlen_q, k.shape[1],
        kv_heads, n_heads // kv_heads, window.lo_diag, window.hi_diag, plan.kv_lo, plan.chunk,
        plan.num_splits, *q.stride(), *k.stride(), *v.stride(),
        triton.next_power_of_2(k.shape[1]),
    )  # fmt: skip
    with device_scope(q):
        kernel[(batch * kv_heads, plan.row_tiles, plan.num_splits)](*args, **meta)
        _flash_decode_combine[(batch * n_heads * seqlen_q,)](
            o_part, lse_part, out, plan.num_splits, seqlen_q, n_heads, *out.stride(),
            HEAD_DIM=head_dim, BLOCK_S=max(2, triton.next_power_of_2(plan.num_splits)),
        )  # fmt: skip
    return out


def flash_attn_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    *,
    num_splits: int | None = None,
    block_n: int | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
) -> torch.Tensor:
    """The split-KV path called directly, for any q_len (tests, benchmarks): num_splits forces
    the cut (rounded to 128-key chunks), block_n the tile (else autotuned). No backward."""
    if torch.is_grad_enabled() and any(getattr(x, "requires_grad", False) for x in (q, k, v)):
        raise NotImplementedError(
            "the Triton backward does not support the split-KV decode path "
            "(flash_attn_func takes the differentiable path for inputs that require grad)"
        )
    config = DecodeConfig(num_splits, block_n, num_warps, num_stages)
    return flash_decode(q, k, v, softmax_scale, causal, window_size, config)
