"""Issue 44, step 15: a warp-specialised Gluon dK/dV kernel for Hopper, FlashAttention-3's plan.

Why by hand: the dK/dV pass is the larger part of our backward, and in plain Triton its best
tile (64 query rows against 128 resident keys over 8 warps) spills registers: every one of
the 256 threads holds its share of dK and dV (64 fp32 registers each), both score tiles, the
streamed tiles' addresses and the loop's pipelining state, and Triton cannot hand a
warpgroup more than 255 registers or take the loads off it (docs/flash-triton-notes.md,
steps 6-10). The forward got 10% from this plan (flash_gluon_ws.py, step 12). Three
partitions per CTA of BLOCK_N = 128 keys:

- a producer warp issues every TMA copy: K and V once (two 64-key halves each), then the
  query tiles' Q(t) and dO(t) into rings of STAGES buffers, each guarded by a "ready"
  mbarrier (the copy's bytes) and an "empty" one (both consumers released it). Buys: no
  consumer spends issue slots or registers on addresses, and a refill starts the moment
  the last reader is done.
- two consumer warpgroups (the default partition and one 4-warp worker), each owning 64 of
  the 128 keys and the same query tiles. Per tile: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ as async
  wgmmas; Pᵀ rebuilt from the LSE while dPᵀ runs; dV += Pᵀ·dO issued, then dSᵀ = Pᵀ∘(dPᵀ −
  delta) computed while it runs; dK += dSᵀ·Q. Pᵀ and dSᵀ feed the tensor cores from
  registers. The two warpgroups' element-wise work and GEMMs interleave on the SM.
- register reallocation (setmaxnreg): the producer's warpgroup drops to 24 registers a
  thread, each consumer gets 240: dK and dV (128), Sᵀ and dPᵀ (64) and the bf16 operands fit
  without a spill.

Semantics are `_flash_bwd_dkdv`'s for the shapes it takes: one query head per K/V head (no
GQA: a K/V head's query heads would need a descriptor each), no window, bottom-right causal
or none, ragged lengths (TMA zero-fills rows past the end; a zero Q and dO row adds nothing
to dK or dV whatever its P), the natural-log LSE (+inf for a row that sees no key: P = 0),
dK scaled once at the end. On the default route where it can run (flash_bwd.GLUON_WS_DKDV,
measured: docs/flash-triton-notes.md, step 15).
"""

from __future__ import annotations

import torch
import triton

from .flash_gluon import _head_desc, _jit, _launch_tile, _tma_load, _tma_store
from .flash_gluon_ws import _MISSING as _MISSING  # what Gluon lacks here, for both kernels
from .flash_gluon_ws import CONSUMER_REGS, PRODUCER_REGS, SHARED_BYTES, _ring_bars
from .flash_gluon_ws import available as available  # the same hardware and Triton check
from .flash_tma import _scratch, eligible

try:  # Gluon is experimental: its Hopper pieces move between Triton versions
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
except Exception:  # flash_gluon_ws's _MISSING says why; available() is then False
    pass

HALF_N = 64  # keys per consumer warpgroup (4 warps x 16 rows of each wgmma)
BLOCK_N = 2 * HALF_N  # keys per CTA


@_jit
def _query_tiles(n0, seqlen_q, seqlen_k, hi_diag, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """(lo, full, end): the query tiles that see part of keys [n0, n0 + BLOCK_N) are
    [lo, full) (masked), those whose every row sees every key [full, end); query i sees
    key j iff j <= i + hi_diag (hi_diag = seqlen_k when not causal: every key)."""
    end = (seqlen_q + BLOCK_M - 1) // BLOCK_M
    lo = gl.minimum(gl.maximum(n0 - hi_diag, 0) // BLOCK_M, end)
    last_key = gl.minimum(n0 + BLOCK_N, seqlen_k) - 1
    full = (gl.maximum(last_key - hi_diag, 0) + BLOCK_M - 1) // BLOCK_M
    return lo, gl.minimum(gl.maximum(full, lo), end), end


@_jit
def _producer(bufs, bars, src, geo):
    """The producer warp: both K and V halves once, then Q(t) and dO(t) of every query tile
    into their rings, each buffer as soon as both consumers released it (a fresh "empty"
    barrier passes parity 1, so the first STAGES copies go at once)."""
    k_bufs, v_bufs, q_ring, do_ring = bufs
    kv_bar, q_ready, q_empty, do_ready, do_empty = bars
    n0, lo, _full, end = geo[0], geo[1], geo[2], geo[3]
    STAGES: gl.constexpr = q_ring.shape[0]
    BLOCK_M: gl.constexpr = q_ring.shape[1]
    HALF: gl.constexpr = k_bufs.shape[1]
    q_desc, do_desc, k_desc, v_desc = _load_descs(src, BLOCK_M, HALF, k_bufs.shape[2])
    mbarrier.expect(kv_bar.index(0), 4 * k_desc.block_type.nbytes)
    for i in gl.static_range(2):
        _tma_load(k_desc, [n0 + i * HALF, 0], kv_bar.index(0), k_bufs.index(i))
        _tma_load(v_desc, [n0 + i * HALF, 0], kv_bar.index(0), v_bufs.index(i))
    for t in range(lo, end):
        it = t - lo
        stage = it % STAGES
        free = ((it // STAGES) & 1) ^ 1
        mbarrier.wait(q_empty.index(stage), free)
        mbarrier.expect(q_ready.index(stage), q_desc.block_type.nbytes)
        _tma_load(q_desc, [t * BLOCK_M, 0], q_ready.index(stage), q_ring.index(stage))
        mbarrier.wait(do_empty.index(stage), free)
        mbarrier.expect(do_ready.index(stage), do_desc.block_type.nbytes)
        _tma_load(do_desc, [t * BLOCK_M, 0], do_ready.index(stage), do_ring.index(stage))


@_jit
def _load_descs(src, BLOCK_M: gl.constexpr, HALF: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Per-head TMA descriptors of Q and dO (query tiles) and K and V (64-key halves), made
    in the partition that uses them (the tensormap's acquire fence is per thread)."""
    Q, K, V, DO, _DK, _DV, b, h, seqlen_q, seqlen_k, strides = src
    q_base = Q + b * strides[0] + h * strides[2]
    q_desc = _head_desc(q_base, seqlen_q, strides[1], BLOCK_M, HEAD_DIM)
    do_base = DO + b * strides[9] + h * strides[11]
    do_desc = _head_desc(do_base, seqlen_q, strides[10], BLOCK_M, HEAD_DIM)
    k_desc = _head_desc(K + b * strides[3] + h * strides[5], seqlen_k, strides[4], HALF, HEAD_DIM)
    v_desc = _head_desc(V + b * strides[6] + h * strides[8], seqlen_k, strides[7], HALF, HEAD_DIM)
    return q_desc, do_desc, k_desc, v_desc


@_jit
def _scores_t(k_smem, v_smem, q_smem, do_smem, ready, stage, phase, s_layout: gl.constexpr):
    """Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ of one query tile, issued as async wgmmas as soon as Q(t),
    then dO(t), has landed."""
    zero = gl.full([k_smem.shape[0], q_smem.shape[0]], 0.0, gl.float32, s_layout)
    mbarrier.wait(ready[0].index(stage), phase)
    s_t = warpgroup_mma(k_smem, q_smem.permute((1, 0)), zero, use_acc=False, is_async=True)
    mbarrier.wait(ready[1].index(stage), phase)
    dp_t = warpgroup_mma(v_smem, do_smem.permute((1, 0)), zero, use_acc=False, is_async=True)
    return s_t, dp_t


@_jit
def _row_stats(lse_base, delta_base, t, seqlen_q, BLOCK_M: gl.constexpr, s_layout: gl.constexpr):
    """(rows, LSE in log2 units, delta) of query tile t, laid out along Sᵀ's columns; rows
    past seqlen_q read an LSE of 0 and a delta of 0 (their Q and dO are zero: they add 0)."""
    rows = t * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    ok = rows < seqlen_q
    lse = gl.load(lse_base + rows, mask=ok, other=0.0) * 1.4426950408889634
    delta = gl.load(delta_base + rows, mask=ok, other=0.0)
    return rows, lse, delta


@_jit
def _tiles(dk, dv, bufs, bars, geo, keys, t0, t1, ME: gl.constexpr, MASKED: gl.constexpr,
           s_layout: gl.constexpr, a_layout: gl.constexpr):  # fmt: skip
    """Query tiles [t0, t1) into this consumer's dK (unscaled) and dV; MASKED tiles zero
    Pᵀ where key j > query i + hi_diag (the causal diagonal). No wgmma in flight on return."""
    k_bufs, v_bufs, q_ring, do_ring = bufs
    _kv_bar, q_ready, q_empty, do_ready, do_empty = bars
    _n0, lo, _full, _end, seqlen_q, hi_diag, qk_scale, lse_base, delta_base = geo
    STAGES: gl.constexpr = q_ring.shape[0]
    BLOCK_M: gl.constexpr = q_ring.shape[1]
    k_smem = k_bufs.index(ME)
    v_smem = v_bufs.index(ME)
    for t in range(t0, t1):
        it = t - lo
        stage = it % STAGES
        phase = (it // STAGES) & 1
        rows, lse, delta = _row_stats(lse_base, delta_base, t, seqlen_q, BLOCK_M, s_layout)
        q_smem = q_ring.index(stage)
        do_smem = do_ring.index(stage)
        s_t, dp_t = _scores_t(k_smem, v_smem, q_smem, do_smem, (q_ready, do_ready), stage,
                              phase, s_layout)  # fmt: skip
        s_t = warpgroup_mma_wait(1, deps=(s_t,))  # Sᵀ done, dPᵀ in flight
        p_t = gl.exp2(s_t * qk_scale - gl.expand_dims(lse, 0))  # Pᵀ, rebuilt exactly
        if MASKED:
            keep = gl.expand_dims(keys, 1) <= gl.expand_dims(rows + hi_diag, 0)
            p_t = gl.where(keep, p_t, 0.0)
        p_op = gl.convert_layout(p_t.to(q_smem.dtype), a_layout)
        dv = warpgroup_mma(p_op, do_smem, dv, is_async=True)  # dV += Pᵀ·dO
        dp_t = warpgroup_mma_wait(1, deps=(dp_t,))  # dPᵀ done, dV's GEMM in flight
        ds_t = p_t * (dp_t - gl.expand_dims(delta, 0))  # dSᵀ, beside dV's GEMM
        ds_op = gl.convert_layout(ds_t.to(q_smem.dtype), a_layout)
        dk = warpgroup_mma(ds_op, q_smem, dk, is_async=True)  # dK += dSᵀ·Q
        dv, dk, p_op, ds_op = warpgroup_mma_wait(0, deps=(dv, dk, p_op, ds_op))
        mbarrier.arrive(q_empty.index(stage), count=1)
        mbarrier.arrive(do_empty.index(stage), count=1)
    return dk, dv


@_jit
def _consumer(bufs, bars, src, geo, softmax_scale, ME: gl.constexpr, CAUSAL: gl.constexpr):
    """One consumer warpgroup (4 warps): keys [n0 + ME * 64, +64) against every query tile
    that sees them, then dK (scaled) and dV through K's and V's own buffers by TMA."""
    k_bufs, v_bufs, q_ring, _do_ring = bufs
    n0, lo, full, end = geo[0], geo[1], geo[2], geo[3]
    HALF: gl.constexpr = k_bufs.shape[1]
    HEAD_DIM: gl.constexpr = k_bufs.shape[2]
    BLOCK_M: gl.constexpr = q_ring.shape[1]
    # each of the 4 warps owns 16 key rows; one wgmma per warpgroup
    s_layout: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, BLOCK_M, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    keys = n0 + ME * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, s_layout))
    dk = gl.zeros([HALF, HEAD_DIM], gl.float32, acc_layout)
    dv = gl.zeros([HALF, HEAD_DIM], gl.float32, acc_layout)
    mbarrier.wait(bars[0].index(0), 0)  # K and V landed
    if CAUSAL:
        dk, dv = _tiles(dk, dv, bufs, bars, geo, keys, lo, full, ME, True, s_layout, a_layout)
        dk, dv = _tiles(dk, dv, bufs, bars, geo, keys, full, end, ME, False, s_layout, a_layout)
    else:
        dk, dv = _tiles(dk, dv, bufs, bars, geo, keys, lo, end, ME, False, s_layout, a_layout)
    _store_grads(dk * softmax_scale, dv, k_bufs.index(ME), v_bufs.index(ME), src, n0 + ME * HALF)


@_jit
def _store_grads(dk, dv, k_smem, v_smem, src, row0):
    """dK and dV of this consumer's 64 keys by TMA through its K and V buffers (every
    wgmma that read them has retired); rows past seqlen_k clipped."""
    _Q, _K, _V, _DO, DK, DV, b, h, _seqlen_q, seqlen_k, strides = src
    HALF: gl.constexpr = k_smem.shape[0]
    HEAD_DIM: gl.constexpr = k_smem.shape[1]
    g_base = b * strides[12] + h * strides[14]  # dK and dV share their strides
    dk_desc = _head_desc(DK + g_base, seqlen_k, strides[13], HALF, HEAD_DIM)
    dv_desc = _head_desc(DV + g_base, seqlen_k, strides[13], HALF, HEAD_DIM)
    k_smem.store(dk.to(k_smem.dtype))
    v_smem.store(dv.to(v_smem.dtype))
    fence_async_shared()
    _tma_store(dk_desc, [row0, 0], k_smem)
    _tma_store(dv_desc, [row0, 0], v_smem)
    tma.store_wait(0)


@_jit(do_not_specialize=["seqlen_q", "seqlen_k", "hi_diag"])
def _flash_bwd_dkdv_ws_kernel(
    Q, K, V, DO, Lse, Delta, DK, DV, softmax_scale, seqlen_q, seqlen_k, n_heads, hi_diag,
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh, stride_dob, stride_dos, stride_doh,
    stride_gb, stride_gs, stride_gh,
    HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
    STAGES: gl.constexpr, L2_GROUP: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr,
):  # fmt: skip
    """One program = one (batch, head) pair x 128 keys (two consumer halves); key tile 0
    (the most queries when causal) launches first, pairs in L2 groups."""
    dtype: gl.constexpr = Q.dtype.element_ty
    HALF: gl.constexpr = 64
    pid_bh, n_tile = _launch_tile(False, L2_GROUP)
    b = (pid_bh // n_heads).to(gl.int64)
    h = (pid_bh % n_heads).to(gl.int64)
    strides = (stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
               stride_vb, stride_vs, stride_vh, stride_dob, stride_dos, stride_doh,
               stride_gb, stride_gs, stride_gh)  # fmt: skip
    src = (Q, K, V, DO, DK, DV, b, h, seqlen_q, seqlen_k, strides)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF, HEAD_DIM], dtype)
    k_bufs = gl.allocate_shared_memory(dtype, [2, HALF, HEAD_DIM], kv_layout)
    v_bufs = gl.allocate_shared_memory(dtype, [2, HALF, HEAD_DIM], kv_layout)
    q_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    do_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    # ready: one arrival (the producer's expect) + the copy's bytes; empty: both consumers
    bars = (_ring_bars(1, 1), _ring_bars(STAGES, 1), _ring_bars(STAGES, 2),
            _ring_bars(STAGES, 1), _ring_bars(STAGES, 2))  # fmt: skip
    fence_async_shared()  # the barriers' init, before the TMA unit or a partition uses them
    n0 = n_tile * (2 * HALF)
    lo, full, end = _query_tiles(n0, seqlen_q, seqlen_k, hi_diag, BLOCK_M, 2 * HALF)
    row_base = pid_bh.to(gl.int64) * seqlen_q  # LSE and delta: [B, H, q_len]
    qk_scale = softmax_scale * 1.4426950408889634  # scores in log2 units: exp2 in the loop
    geo = (n0, lo, full, end, seqlen_q, hi_diag, qk_scale, Lse + row_base, Delta + row_base)
    bufs = (k_bufs, v_bufs, q_ring, do_ring)
    gl.warp_specialize(
        [
            (_consumer, (bufs, bars, src, geo, softmax_scale, 0, CAUSAL)),  # default: 4 warps
            (_consumer, (bufs, bars, src, geo, softmax_scale, 1, CAUSAL)),
            (_producer, (bufs, bars, src, geo)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


def takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor,
          dk: torch.Tensor, windowed: bool) -> bool:  # fmt: skip
    """Whether gluon_ws_dkdv computes these shapes: head_dim 64 or 128, one query head per
    K/V head, no window, fp16/bf16, every tensor TMA-addressable."""
    return (
        q.shape[-1] in (64, 128) and q.shape[2] == k.shape[2] and not windowed
        and q.dtype in (torch.float16, torch.bfloat16) and k.shape == v.shape
        and eligible(q, k, v, dout, dk)
    )  # fmt: skip


def gluon_ws_dkdv(
    tensors: tuple[torch.Tensor, ...], softmax_scale: float, causal: bool,
    block_m: int = 64, stages: int = 2, l2_group: int = 0,
) -> None:  # fmt: skip
    """dK (scaled) and dV into dk, dv of tensors = (q, k, v, dout, lse, delta, dk, dv), the
    [B, S, H, D] inputs and gradients and the [B, H, q_len] fp32 LSE (natural log) and delta
    of flash_bwd; causal is bottom-right aligned (query i sees keys j <= i + Sk - Sq)."""
    q, k, v, dout, lse, delta, dk, dv = tensors
    if block_m not in (64,) or stages < 2:
        raise ValueError(f"block_m 64 and stages >= 2: {block_m}, {stages}")
    batch, seqlen_q, n_heads, head_dim = q.shape
    seqlen_k = k.shape[1]
    ring_bytes = (2 * BLOCK_N + 2 * stages * block_m) * head_dim * q.element_size()
    if ring_bytes > SHARED_BYTES:
        raise ValueError(f"stages {stages} needs {ring_bytes} B of shared memory")
    if dv.stride() != dk.stride():
        raise ValueError("dk and dv of one layout")
    triton.set_allocator(_scratch)  # device-side descriptors need global scratch
    grid = (batch * n_heads, triton.cdiv(seqlen_k, BLOCK_N))
    _flash_bwd_dkdv_ws_kernel[grid](
        q, k, v, dout, lse, delta, dk, dv, softmax_scale, seqlen_q, seqlen_k, n_heads,
        seqlen_k - seqlen_q if causal else seqlen_k,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *dout.stride()[:3], *dk.stride()[:3],
        HEAD_DIM=head_dim, CAUSAL=causal, BLOCK_M=block_m, STAGES=stages, L2_GROUP=l2_group,
        CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS, num_warps=4,
    )  # fmt: skip
