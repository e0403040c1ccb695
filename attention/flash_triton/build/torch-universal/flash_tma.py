"""Issue 44's TMA forward: the forward of flash_fwd.py with Q/K/V/O moved by tensor descriptors.

Meant to buy (Hopper): each K/V tile is copied global -> shared memory by the TMA unit, one
instruction per tile instead of 256 threads each computing addresses and issuing loads, so
the registers that held pointers and masks go to the softmax, and the pipelined loads no
longer compete with the math for issue slots (Triton's tutorial 06 on Hopper: BLOCK_M 128,
BLOCK_N 64/128, 8 warps, 3-4 stages). An earlier try of this idea (a [B*S, H*D] view, the
first version of this kernel) used fewer registers but was not faster at equal config
(docs/flash-triton-notes.md); this one differs in two ways: one descriptor per (batch, head)
of shape [seq_len, head_dim], so a ragged last tile is zero-filled on load and clipped on
store by the hardware (no masks on the loads, nothing written past a head's rows), and the
loop follows the tutorial (l_i updated after P @ V, to shorten live ranges). WARP_SPEC asks
Triton to warp-specialise the unmasked loop (a producer warp issuing TMA loads, consumer
warpgroups doing the math), where this Triton supports it on the target.

Everything else is flash_fwd's: GQA (query head h reads K/V head h // group), bottom-right
causal for q_len != kv_len, windows, rows that see no key, the LSE for training, the causal
diagonal split and heaviest tiles first. The default route at head_dim 128
(flash_fwd.TMA_HEAD_DIMS), where the tutorial's 4-warp 2-stage tile beat every pointer-kernel
config on an H100; elsewhere only when asked (flash_fwd.TMA_FORWARD, a fixed launch's tma).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from .flash_bounds import _launch_tile, _sees, _visit_bounds
from .flash_fwd_config import TMA_ONLY_TILE, _prune_tma_configs

# Device-side descriptors (tl.make_tensor_descriptor) are written by each program into a
# small global scratch buffer (128 B each) that Triton asks an allocator for at launch.
_DESC_BYTES_ALIGN = 16  # TMA: base address and every stride but the last, in bytes


@triton.jit
def _tma_tiles(
    acc, l_i, m_i, q, k_desc, v_desc, offs_m, lo, hi, seqlen_k, lo_diag, hi_diag, qk_scale,
    BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
    MAY_BE_EMPTY: tl.constexpr, UPCAST_DOT: tl.constexpr, WARP_SPEC: tl.constexpr,
):  # fmt: skip
    """Key tiles [lo, hi) into (acc, l_i, m_i), K and V through their descriptors. Rows of a
    tile past seqlen_k arrive as zeros (TMA's out-of-bounds fill): MASKED tiles mask their
    scores to -inf like every other invisible key."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([start_n, 0])  # (BLOCK_N, D), one TMA copy
        if UPCAST_DOT:  # CPU interpreter only: its tl.dot is wrong for bf16 (upcast_dot)
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            s = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N) raw scores, fp32
        if MASKED:
            cols = start_n + offs_n
            keep = _sees(
                (cols < seqlen_k)[None, :],
                cols[None, :],
                offs_m[:, None],
                lo_diag,
                hi_diag,
                CAUSAL,
                WINDOW,
            )
            s = tl.where(keep, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_sub = m_new
            if MAY_BE_EMPTY:  # a row that has seen no key yet: subtract 0, not -inf (NaN)
                m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(s - m_sub[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            m_sub = m_new
            p = tl.math.exp2(s * qk_scale - m_new[:, None])  # one FMA per score
        alpha = tl.math.exp2(m_i - m_sub)  # rescale what was summed under the old max
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([start_n, 0])  # (BLOCK_N, D)
        p = p.to(v.dtype)
        if UPCAST_DOT:  # noqa: SIM108 (constexpr branch)
            acc = tl.dot(p.to(tl.float32), v.to(tl.float32), acc)
        else:
            acc = tl.dot(p, v, acc)  # acc += P @ V, fp32 accumulate
        # The running sum is updated last (as the tutorial does): l_ij and alpha need not
        # stay live across the P @ V issue.
        l_i = l_i * alpha + l_ij
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(
    do_not_specialize=[
        "seqlen_q", "seqlen_k", "n_heads", "group", "lo_diag", "hi_diag", "seq_bucket",
        "kv_bucket",
    ]
)  # fmt: skip
def _flash_fwd_tma_kernel(
    Q, K, V, Out, Lse, softmax_scale, seqlen_q, seqlen_k, n_heads, group, lo_diag, hi_diag,
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh, stride_ob, stride_os, stride_oh,
    seq_bucket, kv_bucket,  # only read by the autotuner's key (next powers of two)
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, HEAVY_FIRST: tl.constexpr = True, UPCAST_DOT: tl.constexpr = False,
    STORE_LSE: tl.constexpr = False, WINDOW: tl.constexpr = False,
    MAY_BE_EMPTY: tl.constexpr = False, WARP_SPEC: tl.constexpr = False,
    L2_GROUP: tl.constexpr = 0,
):  # fmt: skip
    """One program = one (batch, head) pair x BLOCK_M query rows, as _flash_fwd_kernel (the
    last dimension of every tensor contiguous: flash_tma.eligible)."""
    # the tiles that see the most keys first; L2_GROUP: the launch order that keeps K/V in L2
    pid_bh, pid_m = _launch_tile(CAUSAL and HEAVY_FIRST, L2_GROUP)
    b = (pid_bh // n_heads).to(tl.int64)
    h = pid_bh % n_heads
    kv_h = (h // group).to(tl.int64)
    h = h.to(tl.int64)
    first = pid_m * BLOCK_M
    last = tl.minimum(first + BLOCK_M, seqlen_q) - 1
    offs_m = first + tl.arange(0, BLOCK_M)
    # One descriptor per head: [seq_len, D] at that head's base, rows seq_len apart by the
    # tensor's sequence stride; the hardware bounds-checks against seq_len.
    q_desc = tl.make_tensor_descriptor(
        Q + b * stride_qb + h * stride_qh, shape=[seqlen_q, HEAD_DIM],
        strides=[stride_qs, 1], block_shape=[BLOCK_M, HEAD_DIM],
    )  # fmt: skip
    k_desc = tl.make_tensor_descriptor(
        K + b * stride_kb + kv_h * stride_kh, shape=[seqlen_k, HEAD_DIM],
        strides=[stride_ks, 1], block_shape=[BLOCK_N, HEAD_DIM],
    )  # fmt: skip
    v_desc = tl.make_tensor_descriptor(
        V + b * stride_vb + kv_h * stride_vh, shape=[seqlen_k, HEAD_DIM],
        strides=[stride_vs, 1], block_shape=[BLOCK_N, HEAD_DIM],
    )  # fmt: skip
    q = q_desc.load([first, 0])  # (BLOCK_M, D); rows past seqlen_q are zeros
    lo, full_lo, full_hi, hi = _visit_bounds(
        first, last, last + 1, seqlen_k, lo_diag, hi_diag, BLOCK_N
    )
    qk_scale = softmax_scale * 1.4426950408889634  # exp(x) == exp2(x * log2(e))
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if WINDOW:  # the masked left edge of a window
        acc, l_i, m_i = _tma_tiles(
            acc, l_i, m_i, q, k_desc, v_desc, offs_m, lo, full_lo, seqlen_k, lo_diag,
            hi_diag, qk_scale, BLOCK_N, True, CAUSAL, WINDOW, MAY_BE_EMPTY, UPCAST_DOT, False,
        )  # fmt: skip
    acc, l_i, m_i = _tma_tiles(  # tiles every row sees whole: no mask
        acc, l_i, m_i, q, k_desc, v_desc, offs_m, full_lo, full_hi, seqlen_k, lo_diag,
        hi_diag, qk_scale, BLOCK_N, False, CAUSAL, WINDOW, MAY_BE_EMPTY, UPCAST_DOT, WARP_SPEC,
    )  # fmt: skip
    acc, l_i, m_i = _tma_tiles(  # the causal diagonal / window's right edge / ragged end
        acc, l_i, m_i, q, k_desc, v_desc, offs_m, full_hi, hi, seqlen_k, lo_diag,
        hi_diag, qk_scale, BLOCK_N, True, CAUSAL, WINDOW, MAY_BE_EMPTY, UPCAST_DOT, False,
    )  # fmt: skip
    if MAY_BE_EMPTY:  # noqa: SIM108 (constexpr) a row that saw no key: acc = 0, out 0
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    else:
        out = acc / l_i[:, None]
    o_desc = tl.make_tensor_descriptor(  # built after the loop: no registers held during it
        Out + b * stride_ob + h * stride_oh, shape=[seqlen_q, HEAD_DIM],
        strides=[stride_os, 1], block_shape=[BLOCK_M, HEAD_DIM],
    )  # fmt: skip
    o_desc.store([first, 0], out.to(Out.dtype.element_ty))  # rows past seqlen_q: clipped
    if STORE_LSE:  # natural log-sum-exp, +inf for a row that saw no key (flash_fwd)
        lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
        lse = tl.where(l_i == 0.0, float("inf"), lse)
        tl.store(Lse + pid_bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)


def _make_tma_configs() -> list[triton.Config]:
    # Tutorial 06's Hopper shapes that fit 8 warps at head_dim 128 without spilling, its own
    # pick at head_dim 128 (TMA_ONLY_TILE: 4 warps, 2 stages), and a 64x64 tile for short
    # sequences (_prune_tma_configs keeps only it at q_len <= 64).
    shapes = [(128, 128, 8, 3), (128, 64, 8, 3), (128, 64, 8, 4), TMA_ONLY_TILE, (64, 64, 4, 3)]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        for bm, bn, w, s in shapes
    ]


_flash_fwd_tma_autotuned = triton.autotune(
    configs=_make_tma_configs(),
    # + tensors' dtypes; not STORE_LSE: training and inference share one tuned config, so
    # both give bit-identical outputs (as flash_fwd's autotuner)
    key=["seq_bucket", "kv_bucket", "HEAD_DIM", "CAUSAL", "WINDOW", "WARP_SPEC"],
    prune_configs_by={"early_config_prune": _prune_tma_configs},
)(_flash_fwd_tma_kernel)


def eligible(*tensors: torch.Tensor) -> bool:
    """Whether TMA can address these [B, S, H, D] tensors: last dimension contiguous, the
    other strides and the base 16-byte aligned (every head's base then is), head_dim <= 128
    (at 256 the q tile and the staged K/V tiles overflow shared memory)."""
    for t in tensors:
        size = t.element_size()
        if t.shape[-1] > 128 or t.stride(-1) != 1 or t.data_ptr() % _DESC_BYTES_ALIGN:
            return False
        if any((s * size) % _DESC_BYTES_ALIGN for s in t.stride()[:-1]):
            return False
    return True


def _scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Triton's allocator for the descriptors' global scratch (one launch's worth)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def launch_tma(args: tuple, grid: Any, autotuned: bool, meta: dict[str, Any]) -> None:
    """Launch the TMA forward: args as _flash_fwd_kernel's with the last-dimension strides
    dropped, meta its constexprs and (fixed launch) config (flash_fwd._launch builds both)."""
    triton.set_allocator(_scratch)  # device-side descriptors need global scratch
    kernel = _flash_fwd_tma_autotuned if autotuned else _flash_fwd_tma_kernel
    kernel[grid](*args, **meta)
