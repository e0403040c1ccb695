"""Issue 44: a causal/non-causal attention forward for Hopper written in Gluon, by hand.

Why by hand: plain Triton cannot express FlashAttention-3's intra-warpgroup overlap. The
software-pipelined loop tried in Triton (`OVERLAP`, flash_tiles.py) compiled to a
`wgmma.wait_group 0` right after the next tile's Q·Kᵀ commit, before the softmax's `ex2`:
Triton leaves a wgmma in flight only when its result feeds another dot's accumulator, and
scores feed max/exp2 (docs/flash-triton-notes.md, Issue 44, "Offline evidence"). Measured on
an H100 that loop lost (925 against 690 µs at B4 H16 S4096 D128), and the TMA forward
(flash_tma.py) stays at ~0.82x cuDNN. Gluon states the waits itself.

What it is meant to buy: each iteration issues S(t+1) = Q·K(t+1)ᵀ as an async wgmma, then
runs the softmax of tile t while that and P(t-1)·V(t-1) are on the tensor cores, and waits
only with `warpgroup_mma_wait(1)` (one group left in flight). K and V arrive by TMA into two
rings of STAGES shared-memory buffers, each buffer guarded by an mbarrier, refilled as soon
as the wgmma that read it has retired. Semantics are flash_tma's `_flash_fwd_tma_kernel`'s
minus windows: GQA, bottom-right causal, ragged lengths (TMA zero-fills / clips), the
natural-log LSE; the causal diagonal split and its launch orders. Not on the default route.
"""

from __future__ import annotations

import math

import torch
import triton

from .flash_tma import _scratch, eligible

try:  # Gluon is experimental: its Hopper pieces move between Triton versions
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_init,
        warpgroup_mma_wait,
    )

    _jit = gluon.jit
    # Triton 3.6 names the TMA copies async_copy_*; later versions async_load / async_store
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    _tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
    _MISSING = [n for n in ("make_tensor_descriptor", "store_wait") if not hasattr(tma, n)]
except Exception as error:  # any failure means: not available
    _MISSING = [f"{type(error).__name__}: {error}"]

    def _jit(fn=None, **_kwargs):  # the kernels stay plain functions, never launched
        return fn if fn is not None else (lambda f: f)


LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@_jit
def _launch_tile(HEAVY_FIRST: gl.constexpr, L2_GROUP: gl.constexpr):
    """flash_bounds._launch_tile in Gluon: (pair, tile) of this program, L2-grouped order
    when L2_GROUP > 0, the last query tiles (most keys under causal) first."""
    n_pairs = gl.num_programs(0)
    n_tiles = gl.num_programs(1)
    if L2_GROUP == 0:
        pair = gl.program_id(0)
        tile = gl.program_id(1)
    else:
        launched = gl.program_id(1) * n_pairs + gl.program_id(0)
        per_group = L2_GROUP * n_tiles
        first_pair = launched // per_group * L2_GROUP
        width = gl.minimum(n_pairs - first_pair, L2_GROUP)  # the last group may be narrower
        within = launched % per_group
        pair = first_pair + within % width
        tile = within // width
    if HEAVY_FIRST:
        tile = n_tiles - 1 - tile
    return pair, tile


@_jit
def _key_tiles(first, last, seqlen_k, hi_diag, BLOCK_N: gl.constexpr):
    """(full, total): key tiles [0, full) every row of [first, last] sees whole, [full,
    total) masked (flash_bounds._visit_bounds with no left edge)."""
    hi = gl.maximum(gl.minimum(last + hi_diag + 1, seqlen_k), 0)
    full_hi = gl.maximum(gl.minimum(first + hi_diag + 1, seqlen_k), 0) // BLOCK_N * BLOCK_N
    full_hi = gl.minimum(full_hi, hi)
    return full_hi // BLOCK_N, (hi + BLOCK_N - 1) // BLOCK_N


@_jit
def _load_tile(desc, ring, bars, t, pred, STAGES: gl.constexpr):
    """TMA copy of key tile t into its ring buffer (t % STAGES), where pred."""
    stage = t % STAGES
    mbarrier.expect(bars.index(stage), desc.block_type.nbytes, pred=pred)
    _tma_load(
        desc, [t * desc.block_type.shape[0], 0], bars.index(stage), ring.index(stage), pred=pred
    )


@_jit
def _issue_qk(q_smem, k_ring, k_bars, t, s_layout: gl.constexpr, STAGES: gl.constexpr):
    """S(t) = Q·K(t)ᵀ as an async wgmma, once K(t) has landed."""
    stage = t % STAGES
    mbarrier.wait(k_bars.index(stage), (t // STAGES) & 1)
    zero = gl.full([q_smem.shape[0], k_ring.shape[1]], 0.0, gl.float32, s_layout)
    k_t = k_ring.index(stage).permute((1, 0))
    return warpgroup_mma(q_smem, k_t, zero, use_acc=False, is_async=True)


@_jit
def _row_max(
    s, m_i, t, rows, seqlen_k, hi_diag, qk_scale, MASKED: gl.constexpr, CAUSAL: gl.constexpr
):  # fmt: skip
    """(s, m_new, m_sub, alpha) of tile t's raw scores, in the log2(e) scale. MASKED: s comes
    back scaled, keys past seqlen_k and (CAUSAL) right of each row's diagonal at -inf, and
    a row that saw no key yet subtracts 0, not -inf (NaN); unmasked s comes back raw."""
    BLOCK_N: gl.constexpr = s.shape[1]
    if MASKED:
        cols = t * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s.type.layout))
        keep = gl.expand_dims(cols < seqlen_k, 0)
        if CAUSAL:
            keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows + hi_diag, 1))
        s = gl.where(keep, s * qk_scale, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 1))
        m_sub = gl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        m_sub = m_new
    return s, m_new, m_sub, gl.exp2(m_i - m_sub)  # alpha rescales the old sums


@_jit
def _probs(s, m_sub, qk_scale, MASKED: gl.constexpr, p_layout: gl.constexpr, dtype: gl.constexpr):
    """(P in the register layout the P·V wgmma reads, its row sums) of _row_max's s."""
    if MASKED:
        p = gl.exp2(s - gl.expand_dims(m_sub, 1))
    else:
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_sub, 1))  # one FMA per score
    return gl.convert_layout(p.to(dtype), p_layout), gl.sum(p, 1)


@_jit
def _issue_pv(acc, p, v_ring, v_bars, t, STAGES: gl.constexpr):
    """acc += P(t)·V(t) as an async wgmma (P from registers), once V(t) has landed."""
    stage = t % STAGES
    mbarrier.wait(v_bars.index(stage), (t // STAGES) & 1)
    return warpgroup_mma(p, v_ring.index(stage), acc, is_async=True)


@_jit
def _rescale(acc, alpha):
    """acc * alpha per row (alpha from the scores' row layout to the accumulator's)."""
    row: gl.constexpr = gl.SliceLayout(1, acc.type.layout)
    return acc * gl.expand_dims(gl.convert_layout(alpha, row), 1)


@_jit
def _segment(
    acc, m_i, l_i, q_smem, k_ring, v_ring, k_bars, v_bars, k_desc, v_desc, t0, t1, n_tiles,
    rows, seqlen_k, hi_diag, qk_scale, MASKED: gl.constexpr, CAUSAL: gl.constexpr,
    STAGES: gl.constexpr, s_layout: gl.constexpr, p_layout: gl.constexpr,
):  # fmt: skip
    """Key tiles [t0, t1), t1 > t0, into (acc, m_i, l_i); no wgmma is in flight on return.
    Step t: row max of S(t) while P(t-1)·V(t-1) runs; wait for it and rescale acc (nothing
    in flight: ptxas serialises every wgmma if acc is touched while one is); issue S(t+1);
    the exp2 of tile t while S(t+1) runs; issue P(t)·V(t); wait for S(t+1) only. A ring
    buffer is refilled (tile + STAGES) as soon as the wgmma that read it has retired."""
    dtype: gl.constexpr = q_smem.dtype
    t0 = gl.to_tensor(t0)  # the first segment's 0 arrives as a Python int
    s = warpgroup_mma_wait(0, deps=(_issue_qk(q_smem, k_ring, k_bars, t0, s_layout, STAGES),))
    _load_tile(k_desc, k_ring, k_bars, t0 + STAGES, t0 + STAGES < n_tiles, STAGES)
    acc = warpgroup_mma_init(acc)
    p = gl.full([s.shape[0], s.shape[1]], 0.0, dtype, p_layout)  # P(t0 - 1): none
    for t in range(t0, t1 - 1):
        s, m_new, m_sub, alpha = _row_max(
            s, m_i, t, rows, seqlen_k, hi_diag, qk_scale, MASKED, CAUSAL
        )
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))  # P(t-1)·V(t-1) has retired
        refill = (t > t0) & (t - 1 + STAGES < n_tiles)
        _load_tile(v_desc, v_ring, v_bars, t - 1 + STAGES, refill, STAGES)
        acc = _rescale(acc, alpha)
        s_next = _issue_qk(q_smem, k_ring, k_bars, t + 1, s_layout, STAGES)
        p, l_ij = _probs(s, m_sub, qk_scale, MASKED, p_layout, dtype)  # beside S(t+1)
        acc = _issue_pv(acc, p, v_ring, v_bars, t, STAGES)
        s = warpgroup_mma_wait(1, deps=(s_next,))  # S(t+1) done, P(t)·V(t) in flight
        _load_tile(k_desc, k_ring, k_bars, t + 1 + STAGES, t + 1 + STAGES < n_tiles, STAGES)
        l_i = l_i * alpha + l_ij
        m_i = m_new
    last = t1 - 1  # nothing further to issue: finish P(last)·V(last)
    s, m_new, m_sub, alpha = _row_max(
        s, m_i, last, rows, seqlen_k, hi_diag, qk_scale, MASKED, CAUSAL
    )
    acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    refill = (last > t0) & (last - 1 + STAGES < n_tiles)
    _load_tile(v_desc, v_ring, v_bars, last - 1 + STAGES, refill, STAGES)
    acc = _rescale(acc, alpha)
    p, l_ij = _probs(s, m_sub, qk_scale, MASKED, p_layout, dtype)
    acc = _issue_pv(acc, p, v_ring, v_bars, last, STAGES)
    acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    _load_tile(v_desc, v_ring, v_bars, last + STAGES, last + STAGES < n_tiles, STAGES)
    return acc, m_new, l_i * alpha + l_ij


@_jit
def _head_desc(base, seqlen, stride_s, BLOCK: gl.constexpr, HEAD_DIM: gl.constexpr):
    """One head's [seqlen, HEAD_DIM] rows as a TMA descriptor: rows past seqlen read as
    zeros and are clipped on store (flash_tma's per-head descriptors)."""
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for(
        [BLOCK, HEAD_DIM], base.dtype.element_ty
    )
    return tma.make_tensor_descriptor(
        base, shape=[seqlen, HEAD_DIM], strides=[stride_s, 1], block_shape=[BLOCK, HEAD_DIM],
        layout=layout,
    )  # fmt: skip


@_jit
def _store_out(acc, m_i, l_i, q_smem, o_desc, Lse, pid_bh, first, rows, seqlen_q,
               STORE_LSE: gl.constexpr):  # fmt: skip
    """O = acc / l through Q's shared buffer and one TMA store (rows past seqlen_q
    clipped); the natural-log LSE, +inf for a row that saw no key (flash_fwd's)."""
    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, acc.type.layout))
    out = acc / gl.expand_dims(gl.where(l_o == 0.0, 1.0, l_o), 1)
    q_smem.store(out.to(q_smem.dtype))  # every S has retired: Q's buffer is free
    fence_async_shared()
    _tma_store(o_desc, [first, 0], q_smem)
    if STORE_LSE:
        lse = (m_i + gl.log2(l_i)) * 0.6931471805599453  # log2 -> natural log
        lse = gl.where(l_i == 0.0, float("inf"), lse)
        gl.store(Lse + pid_bh.to(gl.int64) * seqlen_q + rows, lse, mask=rows < seqlen_q)
    tma.store_wait(0)


@_jit
def _init_bars(n: gl.constexpr):
    """n mbarriers of one arrival each (the expect of a TMA copy)."""
    bars = gl.allocate_shared_memory(gl.int64, [n, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(n):
        mbarrier.init(bars.index(i), count=1)
    return bars


@_jit(do_not_specialize=["seqlen_q", "seqlen_k", "n_heads", "group", "hi_diag"])
def _flash_fwd_gluon_kernel(
    Q, K, V, Out, Lse, softmax_scale, seqlen_q, seqlen_k, n_heads, group, hi_diag,
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh, stride_ob, stride_os, stride_oh,
    HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, STORE_LSE: gl.constexpr,
    HEAVY_FIRST: gl.constexpr, L2_GROUP: gl.constexpr, num_warps: gl.constexpr,
):  # fmt: skip
    """One program = one (batch, head) pair x BLOCK_M query rows; query i sees keys
    j <= i + hi_diag (hi_diag = seqlen_k - seqlen_q causal, seqlen_k otherwise)."""
    dtype: gl.constexpr = Q.dtype.element_ty
    # every warp owns 16 rows: two warpgroups at 8 warps, each its own wgmmas
    s_layout: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [num_warps, 1], [16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [num_warps, 1], [16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    pid_bh, pid_m = _launch_tile(CAUSAL and HEAVY_FIRST, L2_GROUP)
    b = (pid_bh // n_heads).to(gl.int64)
    h = pid_bh % n_heads
    kv_h = (h // group).to(gl.int64)
    h = h.to(gl.int64)
    q_desc = _head_desc(Q + b * stride_qb + h * stride_qh, seqlen_q, stride_qs, BLOCK_M, HEAD_DIM)
    k_desc = _head_desc(
        K + b * stride_kb + kv_h * stride_kh, seqlen_k, stride_ks, BLOCK_N, HEAD_DIM
    )
    v_desc = _head_desc(
        V + b * stride_vb + kv_h * stride_vh, seqlen_k, stride_vs, BLOCK_N, HEAD_DIM
    )
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = _init_bars(1)
    k_bars = _init_bars(STAGES)
    v_bars = _init_bars(STAGES)
    fence_async_shared()  # the barriers' init, before the TMA unit signals them
    first = pid_m * BLOCK_M
    last = gl.minimum(first + BLOCK_M, seqlen_q) - 1
    n_full, n_tiles = _key_tiles(first, last, seqlen_k, hi_diag, BLOCK_N)
    mbarrier.expect(q_bar.index(0), q_desc.block_type.nbytes)
    _tma_load(q_desc, [first, 0], q_bar.index(0), q_smem)
    for i in gl.static_range(STAGES):  # fill both rings
        _load_tile(k_desc, k_ring, k_bars, i, i < n_tiles, STAGES)
        _load_tile(v_desc, v_ring, v_bars, i, i < n_tiles, STAGES)
    rows = first + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    qk_scale = softmax_scale * 1.4426950408889634  # exp(x) == exp2(x * log2(e))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(q_bar.index(0), 0)
    if n_full > 0:  # tiles every row sees whole: no mask
        acc, m_i, l_i = _segment(
            acc, m_i, l_i, q_smem, k_ring, v_ring, k_bars, v_bars, k_desc, v_desc, 0, n_full,
            n_tiles, rows, seqlen_k, hi_diag, qk_scale, False, CAUSAL, STAGES, s_layout, p_layout,
        )  # fmt: skip
    if n_tiles > n_full:  # the causal diagonal / the ragged end: masked
        acc, m_i, l_i = _segment(
            acc, m_i, l_i, q_smem, k_ring, v_ring, k_bars, v_bars, k_desc, v_desc, n_full,
            n_tiles, n_tiles, rows, seqlen_k, hi_diag, qk_scale, True, CAUSAL, STAGES,
            s_layout, p_layout,
        )  # fmt: skip
    o_desc = _head_desc(Out + b * stride_ob + h * stride_oh, seqlen_q, stride_os, BLOCK_M, HEAD_DIM)
    _store_out(acc, m_i, l_i, q_smem, o_desc, Lse, pid_bh, first, rows, seqlen_q, STORE_LSE)


def available() -> bool:
    """Whether gluon_forward can run here: a Hopper GPU (sm_90) and a Triton whose Gluon has
    the Hopper pieces this module uses (written against Triton 3.6)."""
    if _MISSING or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability() == (9, 0)


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_m: int, warps: int) -> None:
    if q.dtype not in (torch.float16, torch.bfloat16) or {k.dtype, v.dtype} != {q.dtype}:
        raise ValueError(f"fp16 or bf16 q/k/v of one dtype, got {q.dtype}/{k.dtype}/{v.dtype}")
    if q.shape[-1] not in (64, 128) or k.shape != v.shape or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"head_dim 64 or 128, k and v alike: {q.shape}, {k.shape}, {v.shape}")
    if q.shape[2] % k.shape[2] or not eligible(q, k, v):
        raise ValueError("heads a multiple of kv heads, and TMA-addressable tensors")
    if warps not in (4, 8) or block_m % (16 * warps):
        raise ValueError(f"num_warps 4 or 8 and block_m a multiple of 16 * num_warps: {block_m}")


def gluon_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float | None = None,
    causal: bool = False, return_lse: bool = False, block_m: int = 128, block_n: int = 128,
    num_warps: int = 8, stages: int = 2, l2_group: int = 0, heavy_first: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(out [B, Sq, H, D], natural-log LSE [B*H, Sq] fp32 or None) of q [B, Sq, H, D] and
    k/v [B, Sk, Hkv, D]; causal is bottom-right aligned (query i sees keys j <= i + Sk - Sq).
    """
    _check(q, k, v, block_m, num_warps)
    grid, out, lse, args = launch_args(q, k, v, softmax_scale, causal, block_m)
    _flash_fwd_gluon_kernel[grid](
        *args, HEAD_DIM=q.shape[-1], CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n,
        STAGES=stages, STORE_LSE=return_lse, HEAVY_FIRST=heavy_first, L2_GROUP=l2_group,
        num_warps=num_warps,
    )  # fmt: skip
    return out, (lse if return_lse else None)


def launch_args(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float | None,
    causal: bool, block_m: int,
) -> tuple[tuple[int, int], torch.Tensor, torch.Tensor, tuple]:  # fmt: skip
    """(grid, out, lse, positional arguments) of a Gluon forward kernel (this module's and
    flash_gluon_ws's take the same); the device-side descriptors' scratch allocator set."""
    batch, seqlen_q, n_heads, head_dim = q.shape
    seqlen_k = k.shape[1]
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else softmax_scale
    out = torch.empty_like(q)
    lse = torch.empty(batch * n_heads, seqlen_q, dtype=torch.float32, device=q.device)
    triton.set_allocator(_scratch)  # device-side descriptors need global scratch
    args = (q, k, v, out, lse, scale, seqlen_q, seqlen_k, n_heads, n_heads // k.shape[2],
            seqlen_k - seqlen_q if causal else seqlen_k, *q.stride()[:3], *k.stride()[:3],
            *v.stride()[:3], *out.stride()[:3])  # fmt: skip
    return (batch * n_heads, triton.cdiv(seqlen_q, block_m)), out, lse, args
