"""Our FlashAttention-2 forward in Triton: an offline path through `kernels`, readable in traces.

The public, differentiable `flash_attn_func` lives in flash_autograd.py; this module holds the
forward kernel, its autotuner and `_launch`, which also writes the per-row log-sum-exp that
the backward (flash_bwd.py) needs.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from .flash_bounds import _visit_bounds
from .flash_common import (
    INTERPRET,
    SUPPORTED_DTYPES,
    SUPPORTED_HEAD_DIMS,
    check_inputs,
    device_scope,
    resolve_scale,
    resolve_window,
    upcast_dot,
)
from .flash_fwd_config import _make_configs, _prune_configs

__all__ = ["SUPPORTED_DTYPES", "SUPPORTED_HEAD_DIMS"]  # re-exported for older imports


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
            keep = in_seq[None, :]
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None] + hi_diag)
            if WINDOW:
                keep = keep & (cols[None, :] >= offs_m[:, None] + lo_diag)
                keep = keep & (cols[None, :] <= offs_m[:, None] + hi_diag)
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
def _attend_range(
    q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
    offs_m, first, last, lo_cap, hi_cap, seqlen_k, lo_diag, hi_diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, MAY_BE_EMPTY: tl.constexpr,
    SPLIT_DIAGONAL: tl.constexpr, UPCAST_DOT: tl.constexpr,
):  # fmt: skip
    """(acc, l_i, m_i) of query rows at positions offs_m (in [first, last]) over the keys they
    see within [lo_cap, hi_cap) (lo_cap BLOCK_N-aligned): the edge tiles masked, the tiles
    every row sees whole unmasked; tiles no row sees are skipped."""
    lo, full_lo, full_hi, hi = _visit_bounds(
        first, last, last + 1, seqlen_k, lo_diag, hi_diag, BLOCK_N
    )
    lo = tl.maximum(lo, lo_cap)
    hi = tl.maximum(tl.minimum(hi, hi_cap), lo)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    if not SPLIT_DIAGONAL:  # variant for measurement: mask every tile (the last loop)
        full_lo = lo
        full_hi = lo
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp2(s - m_i)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # (BLOCK_M, D) unnormalised output
    if WINDOW:  # the masked left edge (empty without a window: compiled out)
        acc, l_i, m_i = _attn_tiles(
            acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
            offs_m, lo, full_lo, seqlen_k, lo_diag, hi_diag, qk_scale,
            HEAD_DIM, BLOCK_N, True, CAUSAL, WINDOW, MAY_BE_EMPTY, UPCAST_DOT,
        )  # fmt: skip
    acc, l_i, m_i = _attn_tiles(  # tiles every row sees whole: no mask at all
        acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, full_lo, full_hi, seqlen_k, lo_diag, hi_diag, qk_scale,
        HEAD_DIM, BLOCK_N, False, CAUSAL, WINDOW, MAY_BE_EMPTY, UPCAST_DOT,
    )  # fmt: skip
    acc, l_i, m_i = _attn_tiles(  # the causal diagonal / window's right edge / ragged end
        acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, full_hi, hi, seqlen_k, lo_diag, hi_diag, qk_scale,
        HEAD_DIM, BLOCK_N, True, CAUSAL, WINDOW, MAY_BE_EMPTY, UPCAST_DOT,
    )  # fmt: skip
    return acc, l_i, m_i


# Sequence lengths and head counts vary from call to call: no divisibility specialisation on
# them, so one compiled kernel serves every shape with the same dtype/head_dim/config.
@triton.jit(
    do_not_specialize=[
        "seqlen_q", "seqlen_k", "n_heads", "group", "lo_diag", "hi_diag", "seq_bucket",
        "kv_bucket",
    ]
)  # fmt: skip
def _flash_fwd_kernel(
    Q, K, V, Out, Lse, softmax_scale, seqlen_q, seqlen_k, n_heads, group, lo_diag, hi_diag,
    stride_qb, stride_qs, stride_qh, stride_qd, stride_kb, stride_ks, stride_kh, stride_kd,
    stride_vb, stride_vs, stride_vh, stride_vd, stride_ob, stride_os, stride_oh, stride_od,
    seq_bucket, kv_bucket,  # only read by the autotuner's key (next powers of two)
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, SPLIT_DIAGONAL: tl.constexpr = True,
    HEAVY_FIRST: tl.constexpr = True, UPCAST_DOT: tl.constexpr = False,
    STORE_LSE: tl.constexpr = False, WINDOW: tl.constexpr = False,
    MAY_BE_EMPTY: tl.constexpr = False,
):  # fmt: skip
    """One program = one (batch, head) pair x one tile of BLOCK_M query rows.

    Query head h reads K/V head h // group (GQA: no copies). STORE_LSE (training only) also
    writes each row's natural log-sum-exp of the scaled scores to Lse, a contiguous fp32
    [batch, heads, seqlen_q] tensor (+inf for a row that sees no key); inference compiles it out.
    """
    pid_bh = tl.program_id(0)
    pid_m = tl.program_id(1)
    if CAUSAL and HEAVY_FIRST:
        # Causal tiles near the end of the sequence see the most keys: launch them first,
        # so the short ones fill the last wave.
        pid_m = tl.num_programs(1) - 1 - pid_m
    b = (pid_bh // n_heads).to(tl.int64)
    h = pid_bh % n_heads
    m0 = pid_m * BLOCK_M  # first query row of this tile
    # Base pointers in int64: batch/head/row offsets can pass 2**31 elements.
    kv_h = (h // group).to(tl.int64)
    k_base = K + b * stride_kb + kv_h * stride_kh
    v_base = V + b * stride_vb + kv_h * stride_vh
    offs_mt = tl.arange(0, BLOCK_M)  # row within the tile
    offs_m = m0 + offs_mt  # (BLOCK_M,) query positions
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seqlen_q
    # q stays in registers/shared memory for the whole key loop.
    q_ptrs = (
        Q + b * stride_qb + h.to(tl.int64) * stride_qh + m0.to(tl.int64) * stride_qs
        + (offs_mt[:, None] * stride_qs + offs_d[None, :] * stride_qd)
    )  # fmt: skip
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)  # (BLOCK_M, D)
    # exp(x) == exp2(x * log2(e)): fold log2(e) into the scale once, then use exp2.
    acc, l_i, m_i = _attend_range(
        q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, m0, tl.minimum(m0 + BLOCK_M, seqlen_q) - 1, 0, seqlen_k, seqlen_k, lo_diag, hi_diag,
        softmax_scale * 1.4426950408889634, HEAD_DIM, BLOCK_M, BLOCK_N,
        CAUSAL, WINDOW, MAY_BE_EMPTY, SPLIT_DIAGONAL, UPCAST_DOT,
    )  # fmt: skip
    if MAY_BE_EMPTY:  # noqa: SIM108 (constexpr) a row that saw no key: acc = 0, out 0
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    else:  # every row saw at least one key, so l_i > 0 (padded rows are not stored)
        out = acc / l_i[:, None]  # (BLOCK_M, D)
    o_ptrs = (
        Out + b * stride_ob + h.to(tl.int64) * stride_oh + m0.to(tl.int64) * stride_os
        + (offs_mt[:, None] * stride_os + offs_d[None, :] * stride_od)
    )  # fmt: skip
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    if STORE_LSE:  # log(sum_j e^(s_ij)) = (m_i + log2 l_i) * ln 2, back from log2 units
        lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
        lse = tl.where(l_i == 0.0, float("inf"), lse)  # no key: the backward's P is 0
        tl.store(Lse + pid_bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=row_ok)


_flash_fwd_autotuned = triton.autotune(
    configs=_make_configs(),
    key=["seq_bucket", "kv_bucket", "HEAD_DIM", "CAUSAL", "WINDOW"],  # + tensors' dtypes
    prune_configs_by={"early_config_prune": _prune_configs},
)(_flash_fwd_kernel)


def autotune_configs() -> list[str]:
    """The configs the autotuner chooses among (before pruning), e.g. 'BM128 BN64 w8 s3'."""
    return [
        f"BM{c.kwargs['BLOCK_M']} BN{c.kwargs['BLOCK_N']} w{c.num_warps} s{c.num_stages}"
        for c in _make_configs()
    ]


def last_autotune_config() -> dict[str, Any] | None:
    """Config of the latest autotuned launch in this process, e.g.
    {"block_m": 128, "block_n": 64, "num_warps": 8, "num_stages": 3}; None before any."""
    best = getattr(_flash_fwd_autotuned, "best_config", None)
    if best is None:
        return None
    return {
        "block_m": best.kwargs["BLOCK_M"],
        "block_n": best.kwargs["BLOCK_N"],
        "num_warps": best.num_warps,
        "num_stages": best.num_stages,
    }


def last_autotune_choice() -> str | None:
    """last_autotune_config() as one short line, e.g. 'BM128 BN64 w8 s3'."""
    c = last_autotune_config()
    if c is None:
        return None
    return f"BM{c['block_m']} BN{c['block_n']} w{c['num_warps']} s{c['num_stages']}"


_LSE_STAND_IN: dict[torch.device, torch.Tensor] = {}


def _lse_stand_in(device: torch.device) -> torch.Tensor:
    """An fp32 tensor for the Lse argument of inference launches, which never write it.

    Triton's autotuner keys on every tensor argument's dtype: with fp32 here too, inference
    and training share one tuned config, so both give bit-identical outputs.
    """
    if device not in _LSE_STAND_IN:
        _LSE_STAND_IN[device] = torch.empty(1, dtype=torch.float32, device=device)
    return _LSE_STAND_IN[device]


def _launch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None,
    causal: bool,
    config: dict[str, Any] | None,
    return_lse: bool = False,
    window_size: tuple[int, int] = (-1, -1),
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(out, lse): config None = autotuned launch, else the kernel's meta-parameters.

    lse (fp32 [batch, heads, q_len]) is computed only when return_lse; otherwise it is None and
    the kernel compiles without the store, as fast as before the backward existed.
    """
    check_inputs(q, k, v, softmax_scale, window_size)
    batch, seqlen_q, n_heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    window = resolve_window(window_size, causal, seqlen_q, seqlen_k)
    scale = resolve_scale(softmax_scale, head_dim)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # contiguous [B, Sq, H, D]
    lse = None
    if return_lse:
        lse = torch.empty((batch, n_heads, seqlen_q), dtype=torch.float32, device=q.device)
    if out.numel() == 0 or seqlen_k == 0:
        out.zero_()  # no key at all: FlashAttention's convention, output 0 (LSE +inf)
        if lse is not None:
            lse.fill_(float("inf"))
        return out, lse
    if config is None and INTERPRET:
        # The autotuner would time every config in the interpreter: pick one instead.
        config = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    meta = {} if config is None else dict(config)
    if upcast_dot(q.dtype):  # the CPU interpreter's bf16 tl.dot bug (flash_common.upcast_dot)
        meta["UPCAST_DOT"] = True
    args = (
        q, k, v, out, _lse_stand_in(q.device) if lse is None else lse, scale, seqlen_q,
        seqlen_k, n_heads, n_heads // kv_heads, window.lo_diag, window.hi_diag,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        triton.next_power_of_2(seqlen_q), triton.next_power_of_2(seqlen_k),
    )  # fmt: skip

    def grid(launch_meta: dict[str, Any]) -> tuple[int, int]:
        return (batch * n_heads, triton.cdiv(seqlen_q, launch_meta["BLOCK_M"]))

    kernel = _flash_fwd_autotuned if config is None else _flash_fwd_kernel
    with device_scope(q):
        kernel[grid](
            *args, HEAD_DIM=head_dim, CAUSAL=bool(causal), STORE_LSE=return_lse,
            WINDOW=window.windowed, MAY_BE_EMPTY=window.may_be_empty, **meta,
        )  # fmt: skip
    return out, lse


def fixed_config(
    block_m: int,
    block_n: int,
    num_warps: int,
    num_stages: int,
    split_diagonal: bool,
    heavy_first: bool,
) -> dict[str, Any]:
    """The meta-parameters of a fixed (not autotuned) forward launch."""
    return {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "num_warps": num_warps,
        "num_stages": num_stages,
        "SPLIT_DIAGONAL": split_diagonal,
        "HEAVY_FIRST": heavy_first,
    }
