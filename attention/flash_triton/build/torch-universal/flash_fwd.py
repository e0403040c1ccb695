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

from .flash_common import (
    INTERPRET,
    SUPPORTED_DTYPES,
    SUPPORTED_HEAD_DIMS,
    check_inputs,
    device_scope,
    resolve_scale,
    upcast_dot,
)

__all__ = ["SUPPORTED_DTYPES", "SUPPORTED_HEAD_DIMS"]  # re-exported for older imports


@triton.jit
def _attn_tiles(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    stride_ks,
    stride_kd,
    stride_vs,
    stride_vd,
    offs_m,
    lo,
    hi,
    seqlen,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """Fold key/value tiles [lo, hi) into the running softmax state of one query tile.

    State per query row i: m_i = running max of the scaled scores (in log2 units),
    l_i = sum_j exp2(s_ij - m_i), acc = sum_j exp2(s_ij - m_i) * v_j (unnormalised output).
    MASKED tiles apply the sequence-end mask and, if CAUSAL, the j <= i mask; unmasked
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
            in_seq = cols < seqlen
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
                keep = keep & (cols[None, :] <= offs_m[:, None])
            s = tl.where(keep, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))  # (BLOCK_M,)
            p = tl.math.exp2(s - m_new[:, None])  # (BLOCK_M, BLOCK_N)
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)  # (BLOCK_M,)
            p = tl.math.exp2(s * qk_scale - m_new[:, None])  # one FMA per score
        # The max moved from m_i to m_new: rescale what was summed so far by 2^(m_i - m_new).
        alpha = tl.math.exp2(m_i - m_new)  # (BLOCK_M,)
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


# Sequence length and head count vary from call to call: no divisibility specialisation on
# them, so one compiled kernel serves every shape with the same dtype/head_dim/config.
@triton.jit(do_not_specialize=["seqlen", "n_heads", "seq_bucket"])
def _flash_fwd_kernel(
    Q,
    K,
    V,
    Out,
    Lse,
    softmax_scale,
    seqlen,
    n_heads,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_qd,
    stride_kb,
    stride_ks,
    stride_kh,
    stride_kd,
    stride_vb,
    stride_vs,
    stride_vh,
    stride_vd,
    stride_ob,
    stride_os,
    stride_oh,
    stride_od,
    seq_bucket,  # only read by the autotuner's key (next power of two of seqlen)
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_DIAGONAL: tl.constexpr = True,
    HEAVY_FIRST: tl.constexpr = True,
    UPCAST_DOT: tl.constexpr = False,
    STORE_LSE: tl.constexpr = False,
):
    """One program = one (batch, head) pair x one tile of BLOCK_M query rows.

    STORE_LSE (training only) also writes each row's natural log-sum-exp of the scaled scores
    to Lse, a contiguous fp32 [batch, heads, seqlen] tensor; inference compiles it out.
    """
    pid_bh = tl.program_id(0)
    pid_m = tl.program_id(1)
    if CAUSAL and HEAVY_FIRST:
        # Causal tiles near the end of the sequence see the most keys: launch them first,
        # so the short ones fill the last wave.
        pid_m = tl.num_programs(1) - 1 - pid_m
    b = pid_bh // n_heads
    h = pid_bh % n_heads
    m0 = pid_m * BLOCK_M  # first query row of this tile

    # Base pointers in int64: batch/head/row offsets can pass 2**31 elements.
    q_base = Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh
    k_base = K + b.to(tl.int64) * stride_kb + h.to(tl.int64) * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + h.to(tl.int64) * stride_vh
    o_base = Out + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh

    offs_mt = tl.arange(0, BLOCK_M)  # row within the tile
    offs_m = m0 + offs_mt  # (BLOCK_M,) query positions
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seqlen

    # q stays in registers/shared memory for the whole key loop.
    q_ptrs = (
        q_base
        + m0.to(tl.int64) * stride_qs
        + (offs_mt[:, None] * stride_qs + offs_d[None, :] * stride_qd)
    )
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)  # (BLOCK_M, D)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp2(s - m_i)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # (BLOCK_M, D) unnormalised output
    # exp(x) == exp2(x * log2(e)): fold log2(e) into the scale once, then use exp2.
    qk_scale = softmax_scale * 1.4426950408889634

    # Split the key range in two stages:
    #   [0, hi_full): tiles every row of this query tile sees whole -> no masking at all;
    #   [hi_full, hi_end): the causal diagonal and/or the ragged end of the sequence -> masked.
    if CAUSAL:
        hi_full = (m0 // BLOCK_N) * BLOCK_N  # keys < m0 <= every row i of the tile
        hi_end = tl.minimum(m0 + BLOCK_M, seqlen)
    else:
        hi_full = (seqlen // BLOCK_N) * BLOCK_N
        hi_end = seqlen
    if not SPLIT_DIAGONAL:  # variant for measurement: mask every tile
        hi_full = 0

    acc, l_i, m_i = _attn_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, 0, hi_full, seqlen, qk_scale,
        HEAD_DIM, BLOCK_N, False, CAUSAL, UPCAST_DOT,
    )  # fmt: skip
    acc, l_i, m_i = _attn_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, hi_full, hi_end, seqlen, qk_scale,
        HEAD_DIM, BLOCK_N, True, CAUSAL, UPCAST_DOT,
    )  # fmt: skip

    # Every real row saw at least key 0, so l_i > 0 there; padded rows are not stored.
    out = acc / l_i[:, None]  # (BLOCK_M, D)
    o_ptrs = (
        o_base
        + m0.to(tl.int64) * stride_os
        + (offs_mt[:, None] * stride_os + offs_d[None, :] * stride_od)
    )
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    if STORE_LSE:  # log(sum_j e^(s_ij)) = (m_i + log2 l_i) * ln 2, back from log2 units
        lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
        tl.store(Lse + pid_bh.to(tl.int64) * seqlen + offs_m, lse, mask=row_ok)


def _make_configs() -> list[triton.Config]:
    # (BLOCK_M, BLOCK_N, num_warps, num_stages). Kept from a survey of 9 configs on an H200
    # (docs/flash-triton-notes.md): these won or came within a few % at B4 H16 S1024..16384,
    # D 64/128; num_stages=2 lost everywhere at D <= 128 and is kept for head_dim 256 only.
    # BLOCK_M=128 tiles need 8 warps at head_dim 128: with 4 the fp32 accumulator and the
    # score tile spill (Triton 3.9 compiling for sm_90 offline: 255 registers + 376 B stack).
    shapes = [
        (128, 64, 8, 3),
        (128, 64, 8, 4),
        (128, 128, 8, 3),
        (64, 64, 4, 3),  # short sequences
        (128, 64, 4, 3),  # head_dim <= 64 only
        (128, 64, 8, 2),  # head_dim 256 only (shared memory)
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        for bm, bn, w, s in shapes
    ]


def _fits(config: triton.Config, head_dim: int) -> bool:
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    if head_dim >= 256:  # q tile + 2 stages of k/v tiles: 192 KB of shared memory
        return config.num_stages == 2 and config.num_warps == 8
    if config.num_stages == 2:
        return False  # slowest config at every measured shape
    return not (head_dim >= 128 and config.num_warps == 4 and bm * bn > 64 * 64)  # spills


def _prune_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    args = {**named_args, **kwargs}
    kept = [c for c in configs if _fits(c, args["HEAD_DIM"])]
    if args["seqlen"] <= 64:  # one 64-row tile covers the sequence; bigger ones only pad
        small = [c for c in kept if c.kwargs["BLOCK_M"] <= 64 and c.kwargs["BLOCK_N"] <= 64]
        kept = small or kept
    return kept or [configs[0]]


_flash_fwd_autotuned = triton.autotune(
    configs=_make_configs(),
    key=["seq_bucket", "HEAD_DIM", "CAUSAL"],  # the autotuner adds the tensors' dtypes
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
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(out, lse): config None = autotuned launch, else the kernel's meta-parameters.

    lse (fp32 [batch, heads, seq]) is computed only when return_lse; otherwise it is None and
    the kernel compiles without the store, as fast as before the backward existed.
    """
    check_inputs(q, k, v, softmax_scale)
    batch, seqlen, n_heads, head_dim = q.shape
    scale = resolve_scale(softmax_scale, head_dim)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # contiguous [B, S, H, D]
    lse = None
    if return_lse:
        lse = torch.empty((batch, n_heads, seqlen), dtype=torch.float32, device=q.device)
    if out.numel() == 0:
        return out, lse
    if config is None and INTERPRET:
        # The autotuner would time every config in the interpreter: pick one instead.
        config = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    meta = {} if config is None else dict(config)
    if upcast_dot(q.dtype):  # the CPU interpreter's bf16 tl.dot bug (flash_common.upcast_dot)
        meta["UPCAST_DOT"] = True
    args = (
        q, k, v, out, _lse_stand_in(q.device) if lse is None else lse, scale, seqlen, n_heads,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        triton.next_power_of_2(seqlen),
    )  # fmt: skip

    def grid(launch_meta: dict[str, Any]) -> tuple[int, int]:
        return (batch * n_heads, triton.cdiv(seqlen, launch_meta["BLOCK_M"]))

    kernel = _flash_fwd_autotuned if config is None else _flash_fwd_kernel
    with device_scope(q):
        kernel[grid](*args, HEAD_DIM=head_dim, CAUSAL=bool(causal), STORE_LSE=return_lse, **meta)
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
