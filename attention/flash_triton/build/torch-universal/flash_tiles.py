"""The forward's inner loops: fold key/value tiles into one query tile's online softmax.

`_attn_tiles` is the plain loop (masked or not); `_attn_tiles_overlap` is the unmasked loop
software-pipelined by one tile (issue 44's candidate, off by default). flash_fwd.py and
flash_decode.py call them through `_attend_range`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .flash_bounds import _sees


@triton.jit
def _attn_tiles(
    acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
    offs_m, lo, hi, seqlen_k, lo_diag, hi_diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, MAY_BE_EMPTY: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):  # fmt: skip
    """Fold key/value tiles [lo, hi) into the running softmax state of one query tile.

    State per query row: m_i = running max of the scaled scores (in log2 units),
    l_i = sum_j exp2(s_ij - m_i), acc = sum_j exp2(s_ij - m_i) * v_j (unnormalised output).
    offs_m holds each row's query position. MASKED tiles mask keys past seqlen_k and keys
    outside [i + lo_diag, i + hi_diag] (the right bound if CAUSAL, both if WINDOW); unmasked
    tiles skip all of that (the caller only hands them tiles that are fully visible).
    """
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # Pointers to the first tile; the row offset `lo` goes in as int64 (long sequences).
    k_ptrs = (
        k_base
        + tl.cast(lo, tl.int64) * stride_ks
        + (offs_n[:, None] * stride_ks + offs_d[None, :] * stride_kd)
    )  # (BLOCK_N, D)
    v_ptrs = (
        v_base
        + tl.cast(lo, tl.int64) * stride_vs
        + (offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd)
    )  # (BLOCK_N, D)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n  # (BLOCK_N,) key positions
        if MASKED:
            in_seq = cols < seqlen_k
            k = tl.load(k_ptrs, mask=in_seq[:, None], other=0.0)  # (BLOCK_N, D)
        else:
            k = tl.load(k_ptrs)  # (BLOCK_N, D)
        if UPCAST_DOT:  # CPU interpreter only: its tl.dot is wrong for bf16 (see upcast_dot)
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            s = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N) raw scores, fp32
        if MASKED:
            keep = _sees(
                in_seq[None, :], cols[None, :], offs_m[:, None], lo_diag, hi_diag, CAUSAL, WINDOW
            )
            s = tl.where(keep, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))  # (BLOCK_M,)
            m_sub = m_new
            if MAY_BE_EMPTY:  # a row that has seen no key yet: subtract 0, not -inf (NaN)
                m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(s - m_sub[:, None])  # (BLOCK_M, BLOCK_N)
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)  # (BLOCK_M,)
            m_sub = m_new
            p = tl.math.exp2(s * qk_scale - m_new[:, None])  # one FMA per score
        # The max moved from m_i to m_new: rescale what was summed so far by 2^(m_i - m_new).
        alpha = tl.math.exp2(m_i - m_sub)  # (BLOCK_M,)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:  # noqa: SIM108 (constexpr branch, kept parallel to the k load)
            v = tl.load(v_ptrs, mask=in_seq[:, None], other=0.0)  # (BLOCK_N, D)
        else:
            v = tl.load(v_ptrs)  # (BLOCK_N, D)
        acc = acc * alpha[:, None]  # (BLOCK_M, D)
        p = p.to(v.dtype)  # P @ V runs on the tensor cores in fp16/bf16
        if UPCAST_DOT:  # noqa: SIM108 (constexpr branch)
            acc = tl.dot(p.to(tl.float32), v.to(tl.float32), acc)
        else:
            acc = tl.dot(p, v, acc)  # acc += P @ V, fp32 accumulate
        m_i = m_new
        k_ptrs += BLOCK_N * stride_ks
        v_ptrs += BLOCK_N * stride_vs
    return acc, l_i, m_i


@triton.jit
def _qk(q, k, UPCAST_DOT: tl.constexpr):
    """Raw scores q @ k^T (BLOCK_M, BLOCK_N) in fp32."""
    if UPCAST_DOT:  # CPU interpreter only (see flash_common.upcast_dot)
        s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
    else:
        s = tl.dot(q, tl.trans(k))
    return s


@triton.jit
def _fold_visible(acc, l_i, m_i, s, v, qk_scale, UPCAST_DOT: tl.constexpr):
    """One fully visible tile: its raw scores s and values v into (acc, l_i, m_i), as the
    unmasked branch of _attn_tiles does."""
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)  # (BLOCK_M,)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])  # one FMA per score
    alpha = tl.math.exp2(m_i - m_new)  # rescale what was summed under the old max
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    p = p.to(v.dtype)
    if UPCAST_DOT:  # noqa: SIM108 (constexpr branch)
        acc = tl.dot(p.to(tl.float32), v.to(tl.float32), acc)
    else:
        acc = tl.dot(p, v, acc)
    return acc, l_i, m_new


@triton.jit
def _attn_tiles_overlap(
    acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
    lo, hi, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST_DOT: tl.constexpr,
):  # fmt: skip
    """The unmasked tiles [lo, hi), software-pipelined by one tile (FlashAttention-3's
    intra-warpgroup overlap, written by hand): the scores of tile j+1 are issued before the
    softmax of tile j. Meant to buy: the tensor cores run Q K^T (an asynchronous wgmma on
    Hopper) while the same warps do the exp2/max/sum work, instead of one waiting for the
    other. Not measured on a GPU yet, so off by default (flash_fwd.OVERLAP_UNMASKED). An
    offline sm_90 compile (Triton 3.9) suggests it cannot buy that as written: the PTX waits
    for that wgmma (wgmma.wait_group 0) right after issuing it, before the softmax, and the
    kernel needs 254 registers instead of 230 (BM128 BN64 w8)."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k_ptrs = (
        k_base
        + tl.cast(lo, tl.int64) * stride_ks
        + (offs_n[:, None] * stride_ks + offs_d[None, :] * stride_kd)
    )  # (BLOCK_N, D)
    v_ptrs = (
        v_base
        + tl.cast(lo, tl.int64) * stride_vs
        + (offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd)
    )  # (BLOCK_N, D)
    if lo < hi:
        s = _qk(q, tl.load(k_ptrs), UPCAST_DOT)  # prologue: the first tile's scores
        for _ in range(lo + BLOCK_N, hi, BLOCK_N):
            k_ptrs += BLOCK_N * stride_ks
            s_next = _qk(q, tl.load(k_ptrs), UPCAST_DOT)  # next tile's scores, issued first
            acc, l_i, m_i = _fold_visible(acc, l_i, m_i, s, tl.load(v_ptrs), qk_scale, UPCAST_DOT)
            v_ptrs += BLOCK_N * stride_vs
            s = s_next
        acc, l_i, m_i = _fold_visible(acc, l_i, m_i, s, tl.load(v_ptrs), qk_scale, UPCAST_DOT)
    return acc, l_i, m_i
