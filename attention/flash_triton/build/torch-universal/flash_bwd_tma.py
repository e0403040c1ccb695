"""Issue 44's TMA backward kernels: flash_bwd's `_flash_bwd_dkdv` and `_flash_bwd_dq` with Q, dO,
K, V and the gradients' stores moved by tensor descriptors. Off unless a tile asks
(`TileConfig(..., tma=True)`).

Meant to buy (Hopper): the dK/dV kernel is 60% of our backward, and its best tile on the H200
was a small one (32 query rows, 4 warps) because every larger one spilled registers: each
thread held the pointers and masks of the streamed Q and dO tiles. Moved by TMA (one
instruction per tile, rows past the sequence zero-filled by the hardware) those registers go
free, as they did in the forward (flash_tma.py), where the freed registers let a 4-warp tile
run that had spilled and won 7%. Larger query tiles also halve how often K and V are re-read
per query. The dQ kernel (the other ~40%) gets the same: K and V streamed by TMA where it
loaded them transposed through pointers. Whether either wins is the A/B's question
(benchmarks/flash_triton_ab_tiles.py).

Everything else is `_flash_bwd_dkdv`'s: P rebuilt from the forward's LSE, GQA summed over the
group's query heads, the causal diagonal and window edges masked and the rest unmasked, dK
scaled once at the end. LSE and delta are 1-D rows, read through pointers as before.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .flash_bounds import _launch_tile, _sees, _visit_bounds
from .flash_bwd_config import TileConfig
from .flash_tma import _scratch


@triton.jit
def _mma(a, b, acc, UPCAST_DOT: tl.constexpr):
    """acc + a @ b in fp32; fp32 operands where the interpreter's bf16 tl.dot is wrong."""
    if UPCAST_DOT:  # noqa: SIM108 (constexpr branch)
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _dkdv_tma_tiles(
    dk, dv, k, v, q_desc, do_desc, lse_base, delta_base, offs_n, lo, hi, seqlen,
    lo_diag, hi_diag, qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr, UPCAST_DOT: tl.constexpr,
):  # fmt: skip
    """Query tiles [lo, hi) into one key tile's dK (unscaled) and dV, as flash_bwd's
    _dkdv_tiles; Q and dO arrive by TMA (rows past seqlen as zeros)."""
    offs_mt = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_mt
        q = q_desc.load([start_m, 0])  # (BLOCK_M, D), one TMA copy
        if MASKED:
            row_ok = rows < seqlen
            lse = tl.load(lse_base + rows, mask=row_ok, other=0.0)
        else:
            lse = tl.load(lse_base + rows)
        lse2 = lse * 1.4426950408889634  # log2 units, as the scores
        sT = _mma(k, tl.trans(q), tl.zeros([BLOCK_N, BLOCK_M], tl.float32), UPCAST_DOT)
        pT = tl.math.exp2(sT * qk_scale - lse2[None, :])  # P^T, rebuilt exactly
        if MASKED:
            keep = _sees(
                row_ok[None, :], offs_n[:, None], rows[None, :], lo_diag, hi_diag, CAUSAL, WINDOW
            )
            pT = tl.where(keep, pT, 0.0)
            delta = tl.load(delta_base + rows, mask=row_ok, other=0.0)
        else:
            delta = tl.load(delta_base + rows)
        do = do_desc.load([start_m, 0])  # (BLOCK_M, D)
        dv = _mma(pT.to(do.dtype), do, dv, UPCAST_DOT)  # dV += P^T dO
        dpT = _mma(v, tl.trans(do), tl.zeros([BLOCK_N, BLOCK_M], tl.float32), UPCAST_DOT)
        dsT = pT * (dpT - delta[None, :])  # dS^T
        dk = _mma(dsT.to(q.dtype), q, dk, UPCAST_DOT)  # dK += dS^T Q
    return dk, dv


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "kv_heads", "group", "lo_diag", "hi_diag"])
def _flash_bwd_dkdv_tma(
    Q, K, V, DOut, Lse, Delta, DK, DV, softmax_scale, seqlen_q, seqlen_k, kv_heads, group,
    lo_diag, hi_diag, stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh, stride_dob, stride_dos, stride_doh,
    stride_gb, stride_gs, stride_gh,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    UPCAST_DOT: tl.constexpr = False, WINDOW: tl.constexpr = False,
    GROUPED: tl.constexpr = False, L2_GROUP: tl.constexpr = 0,
):  # fmt: skip
    """One program = one (batch, K/V head) x BLOCK_N keys, as _flash_bwd_dkdv (every tensor's
    last dimension contiguous: flash_tma.eligible)."""
    pid_bk, n_tile = _launch_tile(False, L2_GROUP)  # key tile 0 first: the natural order
    n0 = n_tile * BLOCK_N
    b = (pid_bk // kv_heads).to(tl.int64)
    kv_h = (pid_bk % kv_heads).to(tl.int64)
    offs_n = n0 + tl.arange(0, BLOCK_N)
    k = tl.make_tensor_descriptor(K + b * stride_kb + kv_h * stride_kh,  # resident; rows past
        shape=[seqlen_k, HEAD_DIM], strides=[stride_ks, 1],  # seqlen_k are zeros
        block_shape=[BLOCK_N, HEAD_DIM]).load([n0, 0])  # fmt: skip
    v = tl.make_tensor_descriptor(V + b * stride_vb + kv_h * stride_vh, shape=[seqlen_k, HEAD_DIM],
        strides=[stride_vs, 1], block_shape=[BLOCK_N, HEAD_DIM]).load([n0, 0])  # fmt: skip
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = softmax_scale * 1.4426950408889634
    lo, full_lo, full_hi, hi = _visit_bounds(
        n0, n0 + BLOCK_N - 1, seqlen_k, seqlen_q, -hi_diag, -lo_diag, BLOCK_M
    )
    for g in range(group if GROUPED else 1):  # the query heads that read this K/V head
        h = kv_h * group + g
        q_desc = tl.make_tensor_descriptor(Q + b * stride_qb + h * stride_qh,
            shape=[seqlen_q, HEAD_DIM], strides=[stride_qs, 1],
            block_shape=[BLOCK_M, HEAD_DIM])  # fmt: skip
        do_desc = tl.make_tensor_descriptor(DOut + b * stride_dob + h * stride_doh,
            shape=[seqlen_q, HEAD_DIM], strides=[stride_dos, 1],
            block_shape=[BLOCK_M, HEAD_DIM])  # fmt: skip
        row_base = ((b * kv_heads * group) + h) * seqlen_q  # LSE and delta: [B, H, q_len]
        lse_base, delta_base = Lse + row_base, Delta + row_base
        dk, dv = _dkdv_tma_tiles(  # rows that see the tile's first keys only (diagonal)
            dk, dv, k, v, q_desc, do_desc, lse_base, delta_base, offs_n, lo, full_lo, seqlen_q,
            lo_diag, hi_diag, qk_scale, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW,
            UPCAST_DOT)  # fmt: skip
        dk, dv = _dkdv_tma_tiles(  # rows that see every key of the tile: no mask
            dk, dv, k, v, q_desc, do_desc, lse_base, delta_base, offs_n, full_lo, full_hi, seqlen_q,
            lo_diag, hi_diag, qk_scale, BLOCK_M, BLOCK_N, False, CAUSAL, WINDOW,
            UPCAST_DOT)  # fmt: skip
        dk, dv = _dkdv_tma_tiles(  # the window's far edge and the ragged last query tile
            dk, dv, k, v, q_desc, do_desc, lse_base, delta_base, offs_n, full_hi, hi, seqlen_q,
            lo_diag, hi_diag, qk_scale, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW,
            UPCAST_DOT)  # fmt: skip
    g_base = b * stride_gb + kv_h * stride_gh  # dK and dV share their strides
    dk_desc = tl.make_tensor_descriptor(DK + g_base, shape=[seqlen_k, HEAD_DIM],
        strides=[stride_gs, 1], block_shape=[BLOCK_N, HEAD_DIM])  # fmt: skip
    dk_desc.store([n0, 0], (dk * softmax_scale).to(DK.dtype.element_ty))  # rows past: clipped
    dv_desc = tl.make_tensor_descriptor(DV + g_base, shape=[seqlen_k, HEAD_DIM],
        strides=[stride_gs, 1], block_shape=[BLOCK_N, HEAD_DIM])  # fmt: skip
    dv_desc.store([n0, 0], dv.to(DV.dtype.element_ty))


def launch_dkdv_tma(
    tensors: tuple[torch.Tensor, ...], scale: float, shapes: tuple, tile: TileConfig, meta: dict
) -> None:
    """dK and dV through TMA: tensors (q, k, v, dout, lse, delta, dk, dv), shapes flash_bwd's
    (q_len, kv_len, heads, group, lo_diag, hi_diag), meta its constexprs."""
    q, k, v, dout, _, _, dk, _ = tensors
    scalars = (scale, shapes[0], shapes[1], k.shape[2], *shapes[3:])  # K/V heads, not heads
    strides = [t.stride()[:-1] for t in (q, k, v, dout, dk)]  # dK and dV share theirs
    grid = (q.shape[0] * k.shape[2], triton.cdiv(k.shape[1], tile.block_n))
    triton.set_allocator(_scratch)  # device-side descriptors need global scratch
    _flash_bwd_dkdv_tma[grid](
        *tensors, *scalars, *(s for t in strides for s in t), BLOCK_M=tile.block_m,
        BLOCK_N=tile.block_n, num_warps=tile.num_warps, num_stages=tile.num_stages,
        GROUPED=shapes[3] > 1, L2_GROUP=tile.l2_group, **meta,
    )  # fmt: skip


@triton.jit
def _dq_tma_tiles(
    dq, q, do, lse, delta, k_desc, v_desc, offs_m, lo, hi, seqlen, lo_diag, hi_diag,
    qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, UPCAST_DOT: tl.constexpr,
):  # fmt: skip
    """Key tiles [lo, hi) into one query tile's dQ (unscaled), as flash_bwd's _dq_tiles; K and
    V arrive by TMA (rows past seqlen as zeros)."""
    offs_nt = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_nt
        k = k_desc.load([start_n, 0])  # (BLOCK_N, D), one TMA copy
        s = _mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), UPCAST_DOT)
        p = tl.math.exp2(s * qk_scale - lse[:, None])
        if MASKED:
            keep = _sees(
                (cols < seqlen)[None, :],
                cols[None, :],
                offs_m[:, None],
                lo_diag,
                hi_diag,
                CAUSAL,
                WINDOW,
            )
            p = tl.where(keep, p, 0.0)
        v = v_desc.load([start_n, 0])  # (BLOCK_N, D)
        dp = _mma(do, tl.trans(v), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), UPCAST_DOT)
        ds = p * (dp - delta[:, None])
        dq = _mma(ds.to(k.dtype), k, dq, UPCAST_DOT)  # dQ += dS K
    return dq


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "n_heads", "group", "lo_diag", "hi_diag"])
def _flash_bwd_dq_tma(
    Q, K, V, DOut, Lse, Delta, DQ, softmax_scale, seqlen_q, seqlen_k, n_heads, group,
    lo_diag, hi_diag, stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh, stride_dob, stride_dos, stride_doh,
    stride_gb, stride_gs, stride_gh,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    UPCAST_DOT: tl.constexpr = False, WINDOW: tl.constexpr = False, L2_GROUP: tl.constexpr = 0,
):  # fmt: skip
    """One program = one (batch, head) x BLOCK_M queries: their dQ, as _flash_bwd_dq (every
    tensor's last dimension contiguous: flash_tma.eligible)."""
    pid_bh, pid_m = _launch_tile(CAUSAL, L2_GROUP)  # causal: the last query tiles first
    m0 = pid_m * BLOCK_M
    b = (pid_bh // n_heads).to(tl.int64)
    h = (pid_bh % n_heads).to(tl.int64)
    kv_h = h // group
    offs_m = m0 + tl.arange(0, BLOCK_M)
    row_ok = offs_m < seqlen_q
    q_desc = tl.make_tensor_descriptor(Q + b * stride_qb + h * stride_qh,
        shape=[seqlen_q, HEAD_DIM], strides=[stride_qs, 1],
        block_shape=[BLOCK_M, HEAD_DIM])  # fmt: skip
    q = q_desc.load([m0, 0])  # resident; rows past seqlen_q are zeros
    do_desc = tl.make_tensor_descriptor(DOut + b * stride_dob + h * stride_doh,
        shape=[seqlen_q, HEAD_DIM], strides=[stride_dos, 1],
        block_shape=[BLOCK_M, HEAD_DIM])  # fmt: skip
    do = do_desc.load([m0, 0])
    row_base = pid_bh.to(tl.int64) * seqlen_q
    lse = tl.load(Lse + row_base + offs_m, mask=row_ok, other=0.0) * 1.4426950408889634
    delta = tl.load(Delta + row_base + offs_m, mask=row_ok, other=0.0)
    k_desc = tl.make_tensor_descriptor(K + b * stride_kb + kv_h * stride_kh,
        shape=[seqlen_k, HEAD_DIM], strides=[stride_ks, 1],
        block_shape=[BLOCK_N, HEAD_DIM])  # fmt: skip
    v_desc = tl.make_tensor_descriptor(V + b * stride_vb + kv_h * stride_vh,
        shape=[seqlen_k, HEAD_DIM], strides=[stride_vs, 1],
        block_shape=[BLOCK_N, HEAD_DIM])  # fmt: skip
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = softmax_scale * 1.4426950408889634
    lo, full_lo, full_hi, hi = _visit_bounds(
        m0, m0 + BLOCK_M - 1, seqlen_q, seqlen_k, lo_diag, hi_diag, BLOCK_N
    )
    if WINDOW:  # the window's left edge
        dq = _dq_tma_tiles(
            dq, q, do, lse, delta, k_desc, v_desc, offs_m, lo, full_lo, seqlen_k, lo_diag,
            hi_diag, qk_scale, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW, UPCAST_DOT,
        )  # fmt: skip
    dq = _dq_tma_tiles(  # keys every row sees: no mask
        dq, q, do, lse, delta, k_desc, v_desc, offs_m, full_lo, full_hi, seqlen_k, lo_diag,
        hi_diag, qk_scale, BLOCK_M, BLOCK_N, False, CAUSAL, WINDOW, UPCAST_DOT,
    )  # fmt: skip
    dq = _dq_tma_tiles(  # the causal diagonal, the window's right edge, the ragged end
        dq, q, do, lse, delta, k_desc, v_desc, offs_m, full_hi, hi, seqlen_k, lo_diag,
        hi_diag, qk_scale, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW, UPCAST_DOT,
    )  # fmt: skip
    dq_desc = tl.make_tensor_descriptor(DQ + b * stride_gb + h * stride_gh,
        shape=[seqlen_q, HEAD_DIM], strides=[stride_gs, 1],
        block_shape=[BLOCK_M, HEAD_DIM])  # fmt: skip
    dq_desc.store([m0, 0], (dq * softmax_scale).to(DQ.dtype.element_ty))  # rows past: clipped


def launch_dq_tma(
    tensors: tuple[torch.Tensor, ...], scale: float, shapes: tuple, tile: TileConfig, meta: dict
) -> None:
    """dQ through TMA: tensors (q, k, v, dout, lse, delta, dq), shapes flash_bwd's (q_len,
    kv_len, heads, group, lo_diag, hi_diag), meta its constexprs."""
    q, k, v, dout, _, _, dq = tensors
    scalars = (scale, *shapes)
    strides = [t.stride()[:-1] for t in (q, k, v, dout, dq)]
    grid = (q.shape[0] * q.shape[2], triton.cdiv(q.shape[1], tile.block_m))
    triton.set_allocator(_scratch)
    _flash_bwd_dq_tma[grid](
        *tensors, *scalars, *(s for t in strides for s in t), BLOCK_M=tile.block_m,
        BLOCK_N=tile.block_n, num_warps=tile.num_warps, num_stages=tile.num_stages,
        L2_GROUP=tile.l2_group, **meta,
    )  # fmt: skip
