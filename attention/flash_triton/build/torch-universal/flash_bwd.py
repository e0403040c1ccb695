"""FlashAttention-2 backward in Triton: delta, then a dK/dV pass over key tiles, then dQ.

With P = softmax(scale * Q K^T) rebuilt tile by tile from the forward's log-sum-exp (LSE):
  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta) with delta_i = rowsum(dO * O)_i,
  dK = scale * dS^T Q,  dQ = scale * dS K.
Three kernels, no atomics: `_flash_bwd_preprocess` (delta), `_flash_bwd_dkdv` (one program
per key tile, looping over query tiles) and `_flash_bwd_dq` (one program per query tile,
looping over key tiles). Everything accumulates in fp32. `BackwardConfig(atomic_dq=True)`
asks for FlashAttention-2's other way, measured against this one (issue 44): the dK/dV pass
also adds each tile pair's dS K into an fp32 dQ by atomics, and the dQ pass is not run;
`tma_dq=True` makes each of those adds one TMA bulk reduction (FlashAttention-3's way).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import flash_bwd_config, flash_gluon_bwd, flash_tma
from .flash_bounds import _launch_tile, _sees, _visit_bounds
from .flash_bwd_config import (
    BackwardConfig,
    TileConfig,
    check_backward_config,
    default_backward_config,
)
from .flash_bwd_delta import _flash_bwd_preprocess, _load_rows, _row_ptrs
from .flash_bwd_dq import _flash_bwd_dq
from .flash_bwd_tma import _mma, launch_dkdv_tma, launch_dq_tma
from .flash_common import INTERPRET, device_scope, launch_group, resolve_window, upcast_dot


@triton.jit
def _add_dq(
    dsT, k, dq_dest, stride_as, rows, start_m, seqlen,
    BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr,
    UPCAST_DOT: tl.constexpr, DQ_TMA: tl.constexpr,
):  # fmt: skip
    """dQ += dS K for one (key tile, query tile) pair, summed over key tiles in fp32
    (unscaled): no second pass re-computing S and P. dq_dest: the first row's pointer (rows
    stride_as apart), added to by scalar atomics; DQ_TMA (step 14): a tensor descriptor, the
    whole tile added by one TMA bulk reduction (FlashAttention-3's way): no pointer tensor
    held in registers, the add done in L2 by the copy engine while the next tile computes,
    rows past seqlen dropped by the descriptor's bounds."""
    dq = _mma(tl.trans(dsT.to(k.dtype)), k, tl.zeros([BLOCK_M, HEAD_DIM], tl.float32),
              UPCAST_DOT)  # fmt: skip
    if DQ_TMA:
        dq_dest.atomic_add([start_m, 0], dq)
    else:
        ptrs = dq_dest + rows[:, None].to(tl.int64) * stride_as + tl.arange(0, HEAD_DIM)[None, :]
        if MASKED:
            tl.atomic_add(ptrs, dq, mask=(rows < seqlen)[:, None], sem="relaxed")
        else:
            tl.atomic_add(ptrs, dq, sem="relaxed")


@triton.jit
def _dkdv_tiles(
    dk, dv, k, v, q_base, do_base, lse_base, delta_base,
    stride_qs, stride_qd, stride_dos, stride_dod,
    offs_n, lo, hi, seqlen, lo_diag, hi_diag, qk_scale, dq_base, stride_as,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
    UPCAST_DOT: tl.constexpr, ATOMIC_DQ: tl.constexpr, CLAMP_ROWS: tl.constexpr,
    DQ_TMA: tl.constexpr,
):  # fmt: skip
    """Add query tiles [lo, hi) to one key tile's dK (unscaled) and dV (ATOMIC_DQ: and dQ by
    _add_dq). Scores are computed transposed (keys x queries), so the key tile's rows stay
    rows. MASKED tiles mask query rows past seqlen (q_len) and keys outside [i + lo_diag,
    i + hi_diag] (the right bound if CAUSAL, both if WINDOW); the others are fully visible.
    CLAMP_ROWS (issue 44, step 13): a masked tile's rows past seqlen read the last row instead
    of masked loads (P is 0 there by `keep`, so they add nothing): fewer registers."""
    offs_mt = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    qT_ptrs = (
        q_base + tl.cast(lo, tl.int64) * stride_qs
        + (offs_d[:, None] * stride_qd + offs_mt[None, :] * stride_qs)
    )  # (D, BLOCK_M)  # fmt: skip
    do_ptrs = (
        do_base + tl.cast(lo, tl.int64) * stride_dos
        + (offs_mt[:, None] * stride_dos + offs_d[None, :] * stride_dod)
    )  # (BLOCK_M, D)  # fmt: skip
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_mt  # (BLOCK_M,) query positions
        if MASKED:
            row_ok = rows < seqlen
        if CLAMP_ROWS:  # from a scalar tile base; a masked tile's rows past the end read the last
            within = tl.minimum(offs_mt, seqlen - 1 - start_m) if MASKED else offs_mt
            q_tile = q_base + tl.cast(start_m, tl.int64) * stride_qs
            qT = tl.load(q_tile + offs_d[:, None] * stride_qd + within[None, :] * stride_qs)
            lse = tl.load(lse_base + start_m + within)
        elif MASKED:
            qT = tl.load(qT_ptrs, mask=row_ok[None, :], other=0.0)
            lse = tl.load(lse_base + rows, mask=row_ok, other=0.0)
        else:
            qT = tl.load(qT_ptrs)
            lse = tl.load(lse_base + rows)
        lse2 = lse * 1.4426950408889634  # log2 units, as the scores
        sT = _mma(k, qT, tl.zeros([BLOCK_N, BLOCK_M], tl.float32), UPCAST_DOT)  # (K Q^T)
        pT = tl.math.exp2(sT * qk_scale - lse2[None, :])  # P^T, rebuilt exactly
        if MASKED:
            keep = _sees(
                row_ok[None, :], offs_n[:, None], rows[None, :], lo_diag, hi_diag, CAUSAL, WINDOW
            )
            pT = tl.where(keep, pT, 0.0)
        if CLAMP_ROWS:
            do_tile = do_base + tl.cast(start_m, tl.int64) * stride_dos
            do = tl.load(do_tile + within[:, None] * stride_dos + offs_d[None, :] * stride_dod)
            delta = tl.load(delta_base + start_m + within)
        elif MASKED:
            do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0)
            delta = tl.load(delta_base + rows, mask=row_ok, other=0.0)
        else:
            do = tl.load(do_ptrs)
            delta = tl.load(delta_base + rows)
        dv = _mma(pT.to(do.dtype), do, dv, UPCAST_DOT)  # dV += P^T dO
        dpT = _mma(v, tl.trans(do), tl.zeros([BLOCK_N, BLOCK_M], tl.float32), UPCAST_DOT)
        dsT = pT * (dpT - delta[None, :])  # dS^T
        dk = _mma(dsT.to(qT.dtype), tl.trans(qT), dk, UPCAST_DOT)  # dK += dS^T Q
        if ATOMIC_DQ:
            _add_dq(dsT, k, dq_base, stride_as, rows, start_m, seqlen, BLOCK_M, HEAD_DIM, MASKED,
                    UPCAST_DOT, DQ_TMA)  # fmt: skip
        qT_ptrs += BLOCK_M * stride_qs
        do_ptrs += BLOCK_M * stride_dos
    return dk, dv


@triton.jit
def _dkdv_one_head(
    dk, dv, k, v, q_base, do_base, lse_base, delta_base,
    stride_qs, stride_qd, stride_dos, stride_dod,
    offs_n, n0, seqlen_q, seqlen_k, lo_diag, hi_diag, qk_scale, dq_base, stride_as,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, UPCAST_DOT: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, CLAMP_ROWS: tl.constexpr, DQ_TMA: tl.constexpr,
):  # fmt: skip
    """Add one query head's rows to the key tile [n0, n0 + BLOCK_N): the rows that see part of
    it masked, those that see all of it unmasked, the others skipped. Row i sees key j iff
    j - hi_diag <= i <= j - lo_diag."""
    lo, full_lo, full_hi, hi = _visit_bounds(
        n0, n0 + BLOCK_N - 1, seqlen_k, seqlen_q, -hi_diag, -lo_diag, BLOCK_M
    )
    dk, dv = _dkdv_tiles(  # rows that see the tile's first keys only (causal diagonal)
        dk, dv, k, v, q_base, do_base, lse_base, delta_base,
        stride_qs, stride_qd, stride_dos, stride_dod,
        offs_n, lo, full_lo, seqlen_q, lo_diag, hi_diag, qk_scale, dq_base, stride_as,
        HEAD_DIM, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW, UPCAST_DOT, ATOMIC_DQ, CLAMP_ROWS,
        DQ_TMA,
    )  # fmt: skip
    dk, dv = _dkdv_tiles(  # rows that see every key of the tile: no mask
        dk, dv, k, v, q_base, do_base, lse_base, delta_base,
        stride_qs, stride_qd, stride_dos, stride_dod,
        offs_n, full_lo, full_hi, seqlen_q, lo_diag, hi_diag, qk_scale, dq_base, stride_as,
        HEAD_DIM, BLOCK_M, BLOCK_N, False, CAUSAL, WINDOW, UPCAST_DOT, ATOMIC_DQ, CLAMP_ROWS,
        DQ_TMA,
    )  # fmt: skip
    dk, dv = _dkdv_tiles(  # the window's far edge and the ragged last query tile
        dk, dv, k, v, q_base, do_base, lse_base, delta_base,
        stride_qs, stride_qd, stride_dos, stride_dod,
        offs_n, full_hi, hi, seqlen_q, lo_diag, hi_diag, qk_scale, dq_base, stride_as,
        HEAD_DIM, BLOCK_M, BLOCK_N, True, CAUSAL, WINDOW, UPCAST_DOT, ATOMIC_DQ, CLAMP_ROWS,
        DQ_TMA,
    )  # fmt: skip
    return dk, dv


# Sequence lengths and head counts vary from call to call: no divisibility specialisation.
@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "kv_heads", "group", "lo_diag", "hi_diag"])
def _flash_bwd_dkdv(
    Q, K, V, DOut, Lse, Delta, DK, DV, DQAcc, softmax_scale, seqlen_q, seqlen_k, kv_heads, group,
    lo_diag, hi_diag,
    stride_qb, stride_qs, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd,
    stride_dob, stride_dos, stride_doh, stride_dod,
    stride_gb, stride_gs, stride_gh, stride_gd,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST_DOT: tl.constexpr = False,
    WINDOW: tl.constexpr = False, GROUPED: tl.constexpr = False, ATOMIC_DQ: tl.constexpr = False,
    L2_GROUP: tl.constexpr = 0, CLAMP_ROWS: tl.constexpr = False, DQ_TMA: tl.constexpr = False,
):  # fmt: skip
    """One program = one (batch, K/V head) x BLOCK_N keys: their dK and dV (strides
    stride_g*), summed over the group's query heads (GQA). K and V stay resident while each
    head's query tiles stream past. Key tile 0 (most queries when causal) launches first."""
    pid_bk, n_tile = _launch_tile(False, L2_GROUP)  # key tile 0 first: the natural order
    n0 = n_tile * BLOCK_N
    b = (pid_bk // kv_heads).to(tl.int64)
    kv_h = (pid_bk % kv_heads).to(tl.int64)
    offs_n = n0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key positions
    key_ok = offs_n < seqlen_k
    k_base = K + b * stride_kb + kv_h * stride_kh
    k = _load_rows(k_base, n0, stride_ks, stride_kd, seqlen_k, BLOCK_N, HEAD_DIM)  # resident
    v_base = V + b * stride_vb + kv_h * stride_vh
    v = _load_rows(v_base, n0, stride_vs, stride_vd, seqlen_k, BLOCK_N, HEAD_DIM)  # resident
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = softmax_scale * 1.4426950408889634  # scores in log2 units: exp2 in the loop
    # The query heads that read this K/V head; without GQA no loop (it costs registers).
    for g in range(group if GROUPED else 1):
        h = kv_h * group + g
        row_base = ((b * kv_heads * group) + h) * seqlen_q  # LSE and delta: [B, H, q_len]
        dq_base = DQAcc + (b * seqlen_q * kv_heads * group + h) * HEAD_DIM  # [B, q_len, H, D]
        if DQ_TMA:  # this head's dQ rows as a TMA destination (fp32, rows H * D apart)
            dq_base = tl.make_tensor_descriptor(
                dq_base,
                shape=[seqlen_q, HEAD_DIM],
                strides=[kv_heads * group * HEAD_DIM, 1],
                block_shape=[BLOCK_M, HEAD_DIM],
            )
        dk, dv = _dkdv_one_head(
            dk, dv, k, v, Q + b * stride_qb + h * stride_qh,
            DOut + b * stride_dob + h * stride_doh, Lse + row_base, Delta + row_base,
            stride_qs, stride_qd, stride_dos, stride_dod,
            offs_n, n0, seqlen_q, seqlen_k, lo_diag, hi_diag, qk_scale,
            dq_base, kv_heads * group * HEAD_DIM,
            HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, WINDOW, UPCAST_DOT, ATOMIC_DQ, CLAMP_ROWS, DQ_TMA,
        )  # fmt: skip
    g_base = b * stride_gb + kv_h * stride_gh  # dK and dV share their strides
    dk_rows = _row_ptrs(DK + g_base, n0, stride_gs, stride_gd, BLOCK_N, HEAD_DIM)
    tl.store(dk_rows, (dk * softmax_scale).to(DK.dtype.element_ty), mask=key_ok[:, None])
    dv_rows = _row_ptrs(DV + g_base, n0, stride_gs, stride_gd, BLOCK_N, HEAD_DIM)
    tl.store(dv_rows, dv.to(DV.dtype.element_ty), mask=key_ok[:, None])


PREPROCESS_ROWS = 128  # rows of delta per preprocess program
# Step 15 (flash_gluon_bwd.py): the warp-specialised Gluon dK/dV kernel, a producer warp and two
# consumer warpgroups of 64 keys each. H100, B4 H16 S4096 D128 causal: the dK/dV pass 1,337 ->
# 1,060 us (3 stages; 1,079 at 2), the backward 2,110 -> 1,849, gradients bit-identical to the
# Triton kernel's. Where it cannot run (GQA, windows, not sm_90) the Triton kernels stay.
GLUON_WS_DKDV = True
GLUON_WS_DKDV_STAGES = 3  # Q/dO ring depth


def _takes_gluon_ws_dkdv(tensors: tuple[torch.Tensor, ...], meta: dict) -> bool:
    """Whether the dK/dV pass goes to flash_gluon_bwd (GLUON_WS_DKDV): the shapes it
    computes (no GQA, no window, head_dim 64/128, TMA-addressable), where it can run."""
    q, k, v, dout, _lse, _delta, dk, _dv = tensors
    return (
        GLUON_WS_DKDV and not INTERPRET and flash_gluon_bwd.available()
        and flash_gluon_bwd.takes(q, k, v, dout, dk, meta["WINDOW"])
    )  # fmt: skip


def _launch_dkdv(
    tensors: tuple[torch.Tensor, ...], acc: torch.Tensor | None, softmax_scale: float,
    shapes: tuple[int, ...], t: TileConfig, meta: dict, dq_tma: bool = False,
) -> None:  # fmt: skip
    """The dK/dV pass: TMA where its tile asks and can (not with atomic dQ), else pointers;
    acc: the fp32 buffer its atomics sum dQ into (None: the dQ pass computes it), by TMA
    reductions where dq_tma and not under the interpreter."""
    q, k, v, dout, lse, delta, dk, dv = tensors
    if acc is None and _takes_gluon_ws_dkdv(tensors, meta):
        causal, stages = meta["CAUSAL"], GLUON_WS_DKDV_STAGES
        return flash_gluon_bwd.gluon_ws_dkdv(tensors, softmax_scale, causal, 64, stages, t.l2_group)
    if acc is None and t.tma and flash_tma.eligible(q, k, v, dout, dk):
        return launch_dkdv_tma(tensors, softmax_scale, shapes, t, meta)
    seqlen_q, seqlen_k, n_heads = shapes[:3]
    batch, kv_heads = k.shape[0], k.shape[2]
    strides = (*q.stride(), *k.stride(), *v.stride(), *dout.stride())
    dq_tma = dq_tma and acc is not None and not INTERPRET
    if dq_tma:
        triton.set_allocator(flash_tma._scratch)  # device-side descriptors need global scratch
    _flash_bwd_dkdv[(batch * kv_heads, triton.cdiv(seqlen_k, t.block_n))](
        q, k, v, dout, lse, delta, dk, dv, dk if acc is None else acc, softmax_scale,
        seqlen_q, seqlen_k, kv_heads, *shapes[3:], *strides, *dk.stride(),
        BLOCK_M=t.block_m, BLOCK_N=t.block_n, num_warps=t.num_warps, num_stages=t.num_stages,
        GROUPED=kv_heads < n_heads, ATOMIC_DQ=acc is not None, L2_GROUP=t.l2_group,
        CLAMP_ROWS=t.clamp_rows, DQ_TMA=dq_tma, **meta,
    )  # fmt: skip
    return None


def atomic_dq_buffer(
    config: BackwardConfig, dq: torch.Tensor | None, dk: torch.Tensor | None
) -> torch.Tensor | None:
    """The fp32 zeros dQ is summed into when the config asks for atomics and the dK/dV pass
    runs (every gradient wanted); None otherwise (the dQ pass computes it)."""
    if not config.atomic_dq or dq is None or dk is None:
        return None
    return torch.zeros(dq.shape, dtype=torch.float32, device=dq.device)


def finish_atomic_dq(acc: torch.Tensor, dq: torch.Tensor, softmax_scale: float) -> None:
    """dQ = scale * (the atomics' fp32 sum), in dQ's dtype."""
    dq.copy_(acc.mul_(softmax_scale))


def flash_attn_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    softmax_scale: float,
    causal: bool,
    config: BackwardConfig | None = None,
    needs: tuple[bool, bool, bool] = (True, True, True),
    window_size: tuple[int, int] = (-1, -1),
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """(dq, dk, dv) of out = attention(q, k, v) given dout; each new and contiguous, dq of q's
    shape, dk and dv of k's (a K/V head's gradient sums its query-head group), or None where
    `needs` says it is not wanted. q, k, v, dout: any strides; out and lse (fp32 [B, H, q_len],
    natural log, +inf for a row that sees no key) come from the forward with return_lse."""
    batch, seqlen_q, n_heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    window = resolve_window(window_size, causal, seqlen_q, seqlen_k)
    group = launch_group(k, flash_bwd_config.BACKWARD_L2_GROUP)  # where K/V pass L2
    config = config or default_backward_config(head_dim, group)
    check_backward_config(config)
    dout = dout.to(q.dtype)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device) if needs[0] else None
    dk, dv = (None, None)
    if needs[1] or needs[2]:
        dk, dv = (torch.empty(k.shape, dtype=q.dtype, device=q.device) for _ in range(2))
    if q.numel() == 0 or k.numel() == 0:  # nothing attended: every gradient is 0
        return tuple(None if g is None else g.zero_() for g in (dq, dk, dv))  # type: ignore
    delta = torch.empty((batch, n_heads, seqlen_q), dtype=torch.float32, device=q.device)
    shapes = (seqlen_q, seqlen_k, n_heads, n_heads // kv_heads, window.lo_diag, window.hi_diag)
    strides = (*q.stride(), *k.stride(), *v.stride(), *dout.stride())
    meta = {"HEAD_DIM": head_dim, "CAUSAL": bool(causal), "UPCAST_DOT": upcast_dot(q.dtype),
            "WINDOW": window.windowed}  # fmt: skip
    with device_scope(q):
        grid = (batch * n_heads, triton.cdiv(seqlen_q, PREPROCESS_ROWS))
        _flash_bwd_preprocess[grid](
            out, dout, delta, seqlen_q, n_heads, *out.stride(), *dout.stride(),
            HEAD_DIM=head_dim, BLOCK_M=PREPROCESS_ROWS,
        )  # fmt: skip
        acc = atomic_dq_buffer(config, dq, dk)
        if dk is not None and dv is not None:
            tensors = (q, k, v, dout, lse, delta, dk, dv)
            _launch_dkdv(tensors, acc, softmax_scale, shapes, config.dkdv, meta, config.tma_dq)
        t = config.dq
        if acc is not None:
            finish_atomic_dq(acc, dq, softmax_scale)  # type: ignore[arg-type]
        elif dq is not None and t.tma and flash_tma.eligible(q, k, v, dout, dq):
            launch_dq_tma((q, k, v, dout, lse, delta, dq), softmax_scale, shapes, t, meta)
        elif dq is not None:
            _flash_bwd_dq[(batch * n_heads, triton.cdiv(seqlen_q, t.block_m))](
                q, k, v, dout, lse, delta, dq, softmax_scale, *shapes, *strides, *dq.stride(),
                BLOCK_M=t.block_m, BLOCK_N=t.block_n, num_warps=t.num_warps,
                num_stages=t.num_stages, L2_GROUP=t.l2_group, **meta,
            )  # fmt: skip
    return dq, dk if needs[1] else None, dv if needs[2] else None
