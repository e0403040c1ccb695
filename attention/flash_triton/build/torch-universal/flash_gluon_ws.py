"""Issue 44: a warp-specialised Gluon attention forward for Hopper, FlashAttention-3's plan.

Why by hand: flash_gluon.py kept the next tile's Q·Kᵀ in flight over the softmax inside one
warpgroup and measured no faster (624 µs against cuDNN's 505 at B4 H16 S4096 D128 causal,
docs/flash-triton-notes.md, Step 11): its two warpgroups were one partition, tied together
by the CTA-wide barrier of every TMA refill, and both ran their softmax at the same time,
leaving the tensor cores idle meanwhile. FlashAttention-3 credits most of its forward to
warp specialisation; plain Triton cannot state it (its automatic version leaves the
schedule to the compiler), Gluon's `gl.warp_specialize` can. Three partitions per CTA of
BLOCK_M = 128 query rows:

- a producer warp issues every TMA copy (Q once, then K(t), V(t) into rings of STAGES
  buffers), each buffer guarded by a "ready" mbarrier (the copy's bytes) and an "empty"
  one (both consumers released it). Buys: no consumer warp spends issue slots or a
  CTA-wide barrier on loads; a refill starts the moment the last reader is done.
- two consumer warpgroups (the default partition and one 4-warp worker), 64 query rows
  each, same K/V tiles. Per tile t each issues S(t) = Q·K(t)ᵀ and P(t-1)·V(t-1) as async
  wgmmas, then runs the softmax of tile t while P(t-1)·V(t-1) is on the tensor cores.
- ping-pong: a pair of mbarriers passes a turn between the consumers, so one issues its
  two GEMMs only after the other has issued its own. Buys: the warpgroups fall half a step
  apart, one's softmax (exp2 on the MUFU, row max and sums) under the other's GEMMs.
- register reallocation (setmaxnreg through worker_num_regs): the producer's warpgroup
  drops to 24 registers a thread, each consumer gets 240 (64K registers, 3 warpgroups).

Semantics are flash_gluon's `gluon_forward` (its helpers are imported, not copied): GQA,
bottom-right causal, ragged lengths through per-head device-side TMA descriptors, the
natural-log LSE, the causal diagonal split, heavy-first and L2-grouped launch order. Not on
any route.
"""

from __future__ import annotations

import torch

from .flash_gluon import _MISSING as _GLUON_MISSING
from .flash_gluon import (
    _check,
    _head_desc,
    _issue_pv,
    _issue_qk,
    _jit,
    _key_tiles,
    _launch_tile,
    _load_tile,
    _probs,
    _rescale,
    _row_max,
    _store_out,
    _tma_load,
    launch_args,
)

try:  # Gluon is experimental: its Hopper pieces move between Triton versions
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        warpgroup_mma_wait,
    )

    _MISSING = list(_GLUON_MISSING) + [n for n in ("warp_specialize",) if not hasattr(gl, n)]
except Exception as error:  # any failure means: not available
    _MISSING = [*_GLUON_MISSING, f"{type(error).__name__}: {error}"]

CONSUMER_REGS = 240  # per thread, each consumer warpgroup (setmaxnreg)
PRODUCER_REGS = 24  # per thread, the producer's warpgroup (1 warp + 3 idle padding warps)
SHARED_BYTES = 232_448 - 1_024  # an H100 block's 227 KB, less barriers and descriptor staging


@_jit
def _ring_bars(n: gl.constexpr, count: gl.constexpr):
    """n mbarriers that complete a phase after `count` arrivals each."""
    bars = gl.allocate_shared_memory(gl.int64, [n, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(n):
        mbarrier.init(bars.index(i), count=count)
    return bars


@_jit
def _turn_wait(turns, k, ME: gl.constexpr):
    """Wait for this consumer's k-th turn at the tensor cores. Consumer 0 goes first: its
    turn 0 waits on parity 1, which a fresh mbarrier has already completed."""
    mbarrier.wait(turns.index(ME), (k & 1) ^ (1 - ME))


@_jit
def _turn_pass(turns, ME: gl.constexpr):
    """Give the turn to the other consumer (its GEMMs queue behind the ones just issued)."""
    mbarrier.arrive(turns.index(1 - ME), count=1)


@_jit
def _softmax(s, m_i, l_i, t, rows, seqlen_k, hi_diag, qk_scale, MASKED: gl.constexpr,
             CAUSAL: gl.constexpr, p_layout: gl.constexpr, dtype: gl.constexpr):  # fmt: skip
    """(P(t) for the P·V wgmma, alpha rescaling the old sums, m, l) of tile t's scores."""
    s, m_new, m_sub, alpha = _row_max(s, m_i, t, rows, seqlen_k, hi_diag, qk_scale, MASKED, CAUSAL)
    p, l_ij = _probs(s, m_sub, qk_scale, MASKED, p_layout, dtype)
    return p, alpha, m_new, l_i * alpha + l_ij


@_jit
def _first_tile(m_i, l_i, q_smem, bufs, bars, geo, rows, ME: gl.constexpr,
                CAUSAL: gl.constexpr, s_layout: gl.constexpr, p_layout: gl.constexpr):  # fmt: skip
    """Turn 0: S(0) alone (no P·V yet), then its softmax, masked when tile 0 is."""
    _q_bufs, k_ring, _v_ring = bufs
    _q_bars, k_ready, k_empty, _v_ready, _v_empty, turns = bars
    _first, n_full, _n_tiles, _seqlen_q, seqlen_k, hi_diag, qk_scale, _pid_bh, _lse = geo
    STAGES: gl.constexpr = k_ring.shape[0]
    _turn_wait(turns, 0, ME)
    s = _issue_qk(q_smem, k_ring, k_ready, gl.to_tensor(0), s_layout, STAGES)
    _turn_pass(turns, ME)
    s = warpgroup_mma_wait(0, deps=(s,))
    mbarrier.arrive(k_empty.index(0), count=1)  # K(0) read: the producer may refill it
    if n_full > 0:
        p, alpha, m_i, l_i = _softmax(s, m_i, l_i, 0, rows, seqlen_k, hi_diag, qk_scale,
                                      False, CAUSAL, p_layout, q_smem.dtype)  # fmt: skip
    else:
        p, alpha, m_i, l_i = _softmax(s, m_i, l_i, 0, rows, seqlen_k, hi_diag, qk_scale,
                                      True, CAUSAL, p_layout, q_smem.dtype)  # fmt: skip
    return p, alpha, m_i, l_i


@_jit
def _tiles(acc, p, alpha, m_i, l_i, q_smem, bufs, bars, geo, t0, t1, rows, ME: gl.constexpr,
           MASKED: gl.constexpr, CAUSAL: gl.constexpr, s_layout: gl.constexpr,
           p_layout: gl.constexpr):  # fmt: skip
    """Turns [t0, t1), t0 >= 1: each issues S(t) and P(t-1)·V(t-1) inside the turn, then
    the softmax of tile t while P(t-1)·V(t-1) runs (and the other consumer's GEMMs).
    acc is rescaled by alpha(t-1) before its P·V is issued: no wgmma accumulates into it
    then (ptxas serialises every wgmma when an in-flight accumulator is touched)."""
    _q_bufs, k_ring, v_ring = bufs
    _q_bars, k_ready, k_empty, v_ready, v_empty, turns = bars
    _first, _n_full, _n_tiles, _seqlen_q, seqlen_k, hi_diag, qk_scale, _pid_bh, _lse = geo
    STAGES: gl.constexpr = k_ring.shape[0]
    for t in range(t0, t1):
        _turn_wait(turns, t, ME)
        s = _issue_qk(q_smem, k_ring, k_ready, t, s_layout, STAGES)
        acc = _issue_pv(_rescale(acc, alpha), p, v_ring, v_ready, t - 1, STAGES)
        _turn_pass(turns, ME)
        s = warpgroup_mma_wait(1, deps=(s,))  # S(t) done, P(t-1)·V(t-1) in flight
        mbarrier.arrive(k_empty.index(t % STAGES), count=1)
        p_t, alpha, m_i, l_i = _softmax(s, m_i, l_i, t, rows, seqlen_k, hi_diag, qk_scale,
                                        MASKED, CAUSAL, p_layout, q_smem.dtype)  # fmt: skip
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
        mbarrier.arrive(v_empty.index((t - 1) % STAGES), count=1)
        p = p_t
    return acc, p, alpha, m_i, l_i


@_jit
def _last_pv(acc, p, alpha, bufs, bars, n_tiles, ME: gl.constexpr):
    """The last turn: acc * alpha + P(n-1)·V(n-1), waited for."""
    _q_bufs, _k_ring, v_ring = bufs
    _q_bars, _k_ready, _k_empty, v_ready, v_empty, turns = bars
    STAGES: gl.constexpr = v_ring.shape[0]
    _turn_wait(turns, n_tiles, ME)
    acc = _issue_pv(_rescale(acc, alpha), p, v_ring, v_ready, n_tiles - 1, STAGES)
    _turn_pass(turns, ME)
    acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    mbarrier.arrive(v_empty.index((n_tiles - 1) % STAGES), count=1)
    return acc


@_jit
def _consumer(bufs, bars, src, geo, ME: gl.constexpr, CAUSAL: gl.constexpr,
              STORE_LSE: gl.constexpr):  # fmt: skip
    """One consumer warpgroup (4 warps): query rows [first + ME * 64, +64) against every
    key tile the CTA visits (the CTA's own full/masked split, so both take the same
    turns), then O and the LSE of its rows."""
    q_bufs, k_ring, _v_ring = bufs
    q_bars = bars[0]
    first, n_full, n_tiles, seqlen_q, _seqlen_k, _hi_diag, _qk_scale, pid_bh, lse = geo
    HALF: gl.constexpr = q_bufs.shape[1]
    BLOCK_N: gl.constexpr = k_ring.shape[1]
    HEAD_DIM: gl.constexpr = k_ring.shape[2]
    # each of the 4 warps owns 16 rows; one wgmma per warpgroup
    s_layout: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    q_smem = q_bufs.index(ME)
    row0 = first + ME * HALF
    rows = row0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, s_layout))
    m_i = gl.full([HALF], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([HALF], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([HALF, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(q_bars.index(ME), 0)
    if n_tiles > 0:  # a CTA whose rows see no key takes no turn at all
        p, alpha, m_i, l_i = _first_tile(m_i, l_i, q_smem, bufs, bars, geo, rows, ME, CAUSAL,
                                         s_layout, p_layout)  # fmt: skip
        if n_full > 1:  # tiles every row of the CTA sees whole: no mask
            acc, p, alpha, m_i, l_i = _tiles(acc, p, alpha, m_i, l_i, q_smem, bufs, bars, geo,
                                             1, n_full, rows, ME, False, CAUSAL, s_layout,
                                             p_layout)  # fmt: skip
        t_masked = gl.maximum(n_full, 1)
        if n_tiles > t_masked:  # the causal diagonal / the ragged end: masked
            acc, p, alpha, m_i, l_i = _tiles(acc, p, alpha, m_i, l_i, q_smem, bufs, bars, geo,
                                             t_masked, n_tiles, rows, ME, True, CAUSAL,
                                             s_layout, p_layout)  # fmt: skip
        acc = _last_pv(acc, p, alpha, bufs, bars, n_tiles, ME)
    o_desc = _out_desc(src, HALF, HEAD_DIM)  # made by the warps that use it (see _load_descs)
    _store_out(acc, m_i, l_i, q_smem, o_desc, lse, pid_bh, row0, rows, seqlen_q, STORE_LSE)


@_jit
def _producer(bufs, bars, src, geo):
    """The producer warp: both Q halves once, then K(t) and V(t) into their rings, each
    buffer as soon as both consumers released it (a fresh "empty" barrier passes parity
    1, so the first STAGES copies go at once)."""
    q_bufs, k_ring, v_ring = bufs
    q_bars, k_ready, k_empty, v_ready, v_empty, _turns = bars
    first, _n_full, n_tiles = geo[0], geo[1], geo[2]
    STAGES: gl.constexpr = k_ring.shape[0]
    q_desc, k_desc, v_desc = _load_descs(src, q_bufs.shape[1], k_ring.shape[1], k_ring.shape[2])
    for i in gl.static_range(2):
        mbarrier.expect(q_bars.index(i), q_desc.block_type.nbytes)
        _tma_load(q_desc, [first + i * q_bufs.shape[1], 0], q_bars.index(i), q_bufs.index(i))
    for t in range(n_tiles):
        free = ((t // STAGES) & 1) ^ 1
        mbarrier.wait(k_empty.index(t % STAGES), free)
        _load_tile(k_desc, k_ring, k_ready, t, True, STAGES)
        mbarrier.wait(v_empty.index(t % STAGES), free)
        _load_tile(v_desc, v_ring, v_ready, t, True, STAGES)


@_jit
def _load_descs(src, HALF: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Per-head TMA descriptors of Q (64-row halves), K and V. Device-side descriptors are
    made in the partition that uses them: the tensormap's acquire fence is per thread, and
    a partition's warps would otherwise read a descriptor other warps wrote."""
    Q, K, V, _Out, b, h, kv_h, seqlen_q, seqlen_k, strides = src
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh = strides[:6]
    stride_vb, stride_vs, stride_vh = strides[6], strides[7], strides[8]
    q_desc = _head_desc(Q + b * stride_qb + h * stride_qh, seqlen_q, stride_qs, HALF, HEAD_DIM)
    k_desc = _head_desc(K + b * stride_kb + kv_h * stride_kh, seqlen_k, stride_ks, BLOCK_N,
                        HEAD_DIM)  # fmt: skip
    v_desc = _head_desc(V + b * stride_vb + kv_h * stride_vh, seqlen_k, stride_vs, BLOCK_N,
                        HEAD_DIM)  # fmt: skip
    return q_desc, k_desc, v_desc


@_jit
def _out_desc(src, HALF: gl.constexpr, HEAD_DIM: gl.constexpr):
    """O's per-head descriptor, 64-row halves (rows past seqlen_q clipped on store)."""
    _Q, _K, _V, Out, b, h, _kv_h, seqlen_q, _seqlen_k, strides = src
    stride_ob, stride_os, stride_oh = strides[9], strides[10], strides[11]
    return _head_desc(Out + b * stride_ob + h * stride_oh, seqlen_q, stride_os, HALF, HEAD_DIM)


@_jit(do_not_specialize=["seqlen_q", "seqlen_k", "n_heads", "group", "hi_diag"])
def _flash_fwd_ws_kernel(
    Q, K, V, Out, Lse, softmax_scale, seqlen_q, seqlen_k, n_heads, group, hi_diag,
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh, stride_ob, stride_os, stride_oh,
    HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, STORE_LSE: gl.constexpr,
    HEAVY_FIRST: gl.constexpr, L2_GROUP: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr,
):  # fmt: skip
    """One program = one (batch, head) pair x BLOCK_M query rows (two consumer halves);
    query i sees keys j <= i + hi_diag (seqlen_k - seqlen_q causal, seqlen_k otherwise)."""
    dtype: gl.constexpr = Q.dtype.element_ty
    HALF: gl.constexpr = BLOCK_M // 2
    pid_bh, pid_m = _launch_tile(CAUSAL and HEAVY_FIRST, L2_GROUP)
    b = (pid_bh // n_heads).to(gl.int64)
    kv_h = (pid_bh % n_heads // group).to(gl.int64)
    h = (pid_bh % n_heads).to(gl.int64)
    strides = (stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
               stride_vb, stride_vs, stride_vh, stride_ob, stride_os, stride_oh)  # fmt: skip
    src = (Q, K, V, Out, b, h, kv_h, seqlen_q, seqlen_k, strides)
    # the layouts _head_desc's descriptors copy into (the partitions make those)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HALF, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_bufs = gl.allocate_shared_memory(dtype, [2, HALF, HEAD_DIM], q_layout)
    k_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    # ready: one arrival (the producer's expect) + the copy's bytes; empty: both consumers
    bars = (_ring_bars(2, 1), _ring_bars(STAGES, 1), _ring_bars(STAGES, 2),
            _ring_bars(STAGES, 1), _ring_bars(STAGES, 2), _ring_bars(2, 1))  # fmt: skip
    fence_async_shared()  # the barriers' init, before the TMA unit or a partition uses them
    first = pid_m * BLOCK_M
    last = gl.minimum(first + BLOCK_M, seqlen_q) - 1
    n_full, n_tiles = _key_tiles(first, last, seqlen_k, hi_diag, BLOCK_N)
    qk_scale = softmax_scale * 1.4426950408889634  # exp(x) == exp2(x * log2(e))
    geo = (first, n_full, n_tiles, seqlen_q, seqlen_k, hi_diag, qk_scale, pid_bh, Lse)
    bufs = (q_bufs, k_ring, v_ring)
    gl.warp_specialize(
        [
            (_consumer, (bufs, bars, src, geo, 0, CAUSAL, STORE_LSE)),  # default: 4 warps
            (_consumer, (bufs, bars, src, geo, 1, CAUSAL, STORE_LSE)),
            (_producer, (bufs, bars, src, geo)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


def available() -> bool:
    """Whether gluon_ws_forward can run here: a Hopper GPU (sm_90) and a Triton whose Gluon
    has the Hopper pieces and warp_specialize this module uses (written against 3.6)."""
    if _MISSING or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability() == (9, 0)


def gluon_ws_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float | None = None,
    causal: bool = True, return_lse: bool = False, block_m: int = 128, block_n: int = 128,
    stages: int = 2, l2_group: int = 16, heavy_first: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(out [B, Sq, H, D], natural-log LSE [B*H, Sq] fp32 or None) of q [B, Sq, H, D] and
    k/v [B, Sk, Hkv, D]; causal is bottom-right aligned (query i sees keys j <= i + Sk - Sq).
    block_m is 128 (two consumer warpgroups of 64 rows); block_n 64 or 128."""
    _check(q, k, v, 64, 4)  # dtype, head dim, kv heads, TMA-addressable
    if block_m != 128 or block_n not in (64, 128) or stages < 2:
        raise ValueError(f"block_m 128, block_n 64 or 128, stages >= 2: {block_m}, "
                         f"{block_n}, {stages}")  # fmt: skip
    head_dim = q.shape[-1]
    ring_bytes = (block_m + 2 * stages * block_n) * head_dim * q.element_size()  # Q, K, V
    if ring_bytes > SHARED_BYTES:
        raise ValueError(f"stages {stages} x block_n {block_n} needs {ring_bytes} B of shared "
                         f"memory, more than {SHARED_BYTES}")  # fmt: skip
    grid, out, lse, args = launch_args(q, k, v, softmax_scale, causal, block_m)
    _flash_fwd_ws_kernel[grid](
        *args, HEAD_DIM=head_dim, CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n,
        STAGES=stages, STORE_LSE=return_lse, HEAVY_FIRST=heavy_first, L2_GROUP=l2_group,
        CONSUMER_REGS=CONSUMER_REGS, PRODUCER_REGS=PRODUCER_REGS, num_warps=4,
    )  # fmt: skip
    return out, (lse if return_lse else None)
