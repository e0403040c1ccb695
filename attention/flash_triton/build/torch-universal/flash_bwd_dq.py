"""The backward's dQ pass (flash_bwd.py's two-pass backward): one program per query tile,
looping over the key tiles it sees, re-computing S and P from the forward's LSE."""

from __future__ import annotations

import triton
import triton.language as tl

from .flash_bounds import _launch_tile, _sees, _visit_bounds
from .flash_bwd_delta import _load_rows, _row_ptrs
from .flash_bwd_tma import _mma


@triton.jit
def _dq_tiles(
    dq, q, do, lse, delta, k_base, v_base,
    stride_ks, stride_kd, stride_vs, stride_vd,
    offs_m, lo, hi, seqlen, lo_diag, hi_diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):  # fmt: skip
    """Add key tiles [lo, hi) to one query tile's dQ (unscaled). MASKED tiles mask keys past
    seqlen (kv_len) and outside [i + lo_diag, i + hi_diag] (as _dkdv_tiles); the others are
    fully visible. lse is in log2 units (+inf for a row that sees no key: P = 0)."""
    offs_nt = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kT_ptrs = (
        k_base + tl.cast(lo, tl.int64) * stride_ks
        + (offs_d[:, None] * stride_kd + offs_nt[None, :] * stride_ks)
    )  # (D, BLOCK_N)  # fmt: skip
    vT_ptrs = (
        v_base + tl.cast(lo, tl.int64) * stride_vs
        + (offs_d[:, None] * stride_vd + offs_nt[None, :] * stride_vs)
    )  # (D, BLOCK_N)  # fmt: skip
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_nt  # (BLOCK_N,) key positions
        if MASKED:
            col_ok = cols < seqlen
            kT = tl.load(kT_ptrs, mask=col_ok[None, :], other=0.0)
            vT = tl.load(vT_ptrs, mask=col_ok[None, :], other=0.0)
        else:
            kT = tl.load(kT_ptrs)
            vT = tl.load(vT_ptrs)
        s = _mma(q, kT, tl.zeros([BLOCK_M, BLOCK_N], tl.float32), UPCAST_DOT)  # Q K^T
        p = tl.math.exp2(s * qk_scale - lse[:, None])
        if MASKED:
            keep = _sees(
                col_ok[None, :], cols[None, :], offs_m[:, None], lo_diag, hi_diag, CAUSAL, WINDOW
            )
            p = tl.where(keep, p, 0.0)
        dp = _mma(do, vT, tl.zeros([BLOCK_M, BLOCK_N], tl.float32), UPCAST_DOT)  # dO V^T
        ds = p * (dp - delta[:, None])
        dq = _mma(ds.to(kT.dtype), tl.trans(kT), dq, UPCAST_DOT)  # dQ += dS K
        kT_ptrs += BLOCK_N * stride_ks
        vT_ptrs += BLOCK_N * stride_vs
    return dq


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "n_heads", "group", "lo_diag", "hi_diag"])
def _flash_bwd_dq(
    Q, K, V, DOut, Lse, Delta, DQ, softmax_scale, seqlen_q, seqlen_k, n_heads, group,
    lo_diag, hi_diag,
    stride_qb, stride_qs, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_dob, stride_dos, stride_doh, stride_dod,
    stride_gb, stride_gs, stride_gh, stride_gd,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST_DOT: tl.constexpr = False,
    WINDOW: tl.constexpr = False, L2_GROUP: tl.constexpr = 0,
):  # fmt: skip
    """One program = one (batch, head) x BLOCK_M queries: their dQ (strides stride_g*).

    Key tiles the rows see whole go unmasked, the edge tiles (causal diagonal, window's
    left edge, ragged end) masked, the others are skipped; the last query tiles go first.
    """
    pid_bh, pid_m = _launch_tile(CAUSAL, L2_GROUP)  # causal: the last query tiles first
    m0 = pid_m * BLOCK_M
    b = (pid_bh // n_heads).to(tl.int64)
    h = (pid_bh % n_heads).to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    row_ok = offs_m < seqlen_q
    q = _load_rows(Q + b * stride_qb + h * stride_qh, m0, stride_qs, stride_qd, seqlen_q,
                   BLOCK_M, HEAD_DIM)  # resident  # fmt: skip
    do = _load_rows(DOut + b * stride_dob + h * stride_doh, m0, stride_dos, stride_dod,
                    seqlen_q, BLOCK_M, HEAD_DIM)  # resident  # fmt: skip
    row_base = pid_bh.to(tl.int64) * seqlen_q
    lse = tl.load(Lse + row_base + offs_m, mask=row_ok, other=0.0) * 1.4426950408889634
    delta = tl.load(Delta + row_base + offs_m, mask=row_ok, other=0.0)
    kv_h = h // group
    k_base = K + b * stride_kb + kv_h * stride_kh
    v_base = V + b * stride_vb + kv_h * stride_vh
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = softmax_scale * 1.4426950408889634
    lo, full_lo, full_hi, hi = _visit_bounds(
        m0, m0 + BLOCK_M - 1, seqlen_q, seqlen_k, lo_diag, hi_diag, BLOCK_N
    )
    if WINDOW:  # the window's left edge (empty without a window: compiled out)
        dq = _dq_tiles(
            dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
            offs_m, lo, full_lo, seqlen_k, lo_diag, hi_diag, qk_scale,
            HEAD_DIM, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW, UPCAST_DOT,
        )  # fmt: skip
    dq = _dq_tiles(
        dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, full_lo, full_hi, seqlen_k, lo_diag, hi_diag, qk_scale,
        HEAD_DIM, BLOCK_M, BLOCK_N, False, CAUSAL, WINDOW, UPCAST_DOT,
    )  # fmt: skip
    dq = _dq_tiles(
        dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, full_hi, hi, seqlen_k, lo_diag, hi_diag, qk_scale,
        HEAD_DIM, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW, UPCAST_DOT,
    )  # fmt: skip
    dq_rows = _row_ptrs(
        DQ + b * stride_gb + h * stride_gh, m0, stride_gs, stride_gd, BLOCK_M, HEAD_DIM
    )
    tl.store(dq_rows, (dq * softmax_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])
