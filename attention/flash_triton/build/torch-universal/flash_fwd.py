"""Our FlashAttention-2 forward in Triton: an offline path through `kernels`, readable in traces."""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from typing import Any

import torch
import triton
import triton.language as tl

try:  # host-side TMA descriptors (Triton >= 3.4); only the experimental TMA variant uses them
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover
    TensorDescriptor = None

# TRITON_INTERPRET=1 must be set before triton is imported; then kernels run on CPU tensors.
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128, 256)


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
        if UPCAST_DOT:  # CPU interpreter only: its tl.dot is wrong for bf16 (see _launch)
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
):
    """One program = one (batch, head) pair x one tile of BLOCK_M query rows."""
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


@triton.jit
def _attn_tiles_tma(
    acc,
    l_i,
    m_i,
    q,
    k_desc,
    v_desc,
    row0,
    col,
    offs_m,
    lo,
    hi,
    seqlen,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """As _attn_tiles, loading K/V tiles with TMA from the 2-D view [B*S, H*D]."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n  # (BLOCK_N,) key positions
        k = k_desc.load([row0 + start_n, col])  # (BLOCK_N, D)
        if UPCAST_DOT:  # CPU interpreter only: its tl.dot is wrong for bf16 (see _launch)
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            s = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N) raw scores, fp32
        if MASKED:
            in_seq = cols < seqlen
            keep = in_seq[None, :]
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            s = tl.where(keep, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([row0 + start_n, col])  # (BLOCK_N, D)
        if MASKED:
            # Rows past seqlen belong to the next batch (or are TMA zero fill): p is 0 there,
            # but 0 * inf would still be NaN, so zero them.
            v = tl.where(in_seq[:, None], v, 0.0)
        acc = acc * alpha[:, None]
        p = p.to(v.dtype)
        if UPCAST_DOT:  # noqa: SIM108 (constexpr branch)
            acc = tl.dot(p.to(tl.float32), v.to(tl.float32), acc)
        else:
            acc = tl.dot(p, v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["seqlen", "n_heads", "seq_bucket"])
def _flash_fwd_kernel_tma(
    q_desc,
    k_desc,
    v_desc,
    Out,
    softmax_scale,
    seqlen,
    n_heads,
    stride_ob,
    stride_os,
    stride_oh,
    stride_od,
    seq_bucket,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_DIAGONAL: tl.constexpr = True,
    HEAVY_FIRST: tl.constexpr = True,
    UPCAST_DOT: tl.constexpr = False,
):
    """Experimental variant of _flash_fwd_kernel: q/k/v tiles come through TMA descriptors
    over the 2-D view [B*S, H*D] (needs contiguous heads and head_dim)."""
    pid_bh = tl.program_id(0)
    pid_m = tl.program_id(1)
    if CAUSAL and HEAVY_FIRST:
        pid_m = tl.num_programs(1) - 1 - pid_m
    b = pid_bh // n_heads
    h = pid_bh % n_heads
    m0 = pid_m * BLOCK_M
    row0 = b * seqlen  # row of token 0 of this batch in the [B*S, H*D] view
    col = h * HEAD_DIM

    offs_mt = tl.arange(0, BLOCK_M)
    offs_m = m0 + offs_mt
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seqlen
    q = q_desc.load([row0 + m0, col])  # (BLOCK_M, D); rows past seqlen are never stored

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = softmax_scale * 1.4426950408889634
    if CAUSAL:
        hi_full = (m0 // BLOCK_N) * BLOCK_N
        hi_end = tl.minimum(m0 + BLOCK_M, seqlen)
    else:
        hi_full = (seqlen // BLOCK_N) * BLOCK_N
        hi_end = seqlen
    if not SPLIT_DIAGONAL:
        hi_full = 0
    acc, l_i, m_i = _attn_tiles_tma(
        acc, l_i, m_i, q, k_desc, v_desc, row0, col, offs_m, 0, hi_full, seqlen, qk_scale,
        BLOCK_N, False, CAUSAL, UPCAST_DOT,
    )  # fmt: skip
    acc, l_i, m_i = _attn_tiles_tma(
        acc, l_i, m_i, q, k_desc, v_desc, row0, col, offs_m, hi_full, hi_end, seqlen, qk_scale,
        BLOCK_N, True, CAUSAL, UPCAST_DOT,
    )  # fmt: skip
    out = acc / l_i[:, None]
    o_ptrs = (
        Out
        + b.to(tl.int64) * stride_ob
        + h.to(tl.int64) * stride_oh
        + m0.to(tl.int64) * stride_os
        + (offs_mt[:, None] * stride_os + offs_d[None, :] * stride_od)
    )
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])


def _make_configs(pre_hook: Any = None) -> list[triton.Config]:
    # (BLOCK_M, BLOCK_N, num_warps, num_stages): a short list of what usually wins for
    # FA2-style forwards on Hopper, so that autotuning one shape costs seconds, not minutes.
    # BLOCK_M=128 tiles need 8 warps at head_dim 128: with 4 the fp32 accumulator and the
    # score tile spill (ptxas, sm_90, Triton 3.9: 255 registers + 120..376 B stack).
    shapes = [
        (128, 64, 8, 2),
        (128, 64, 8, 3),
        (128, 64, 8, 4),
        (128, 128, 8, 2),
        (128, 128, 8, 3),
        (64, 64, 4, 3),
        (64, 64, 4, 4),
        (128, 64, 4, 3),  # head_dim <= 64 only
        (64, 128, 4, 2),  # head_dim <= 64 only
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s, pre_hook=pre_hook)
        for bm, bn, w, s in shapes
    ]


def _keep_config(config: triton.Config, head_dim: int, seqlen: int) -> bool:
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    warps, stages = config.num_warps, config.num_stages
    if head_dim >= 128 and warps == 4 and bm * bn > 64 * 64:
        return False  # register spills (see above)
    if head_dim >= 256 and (bm * bn > 128 * 64 or stages > 2 or warps == 4):
        return False  # shared memory and registers run out
    # Short sequences: one 64-row tile already covers them, bigger tiles only add padding.
    return seqlen > 64 or (bm <= 64 and bn <= 64)


def _prune_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    args = {**named_args, **kwargs}
    kept = [c for c in configs if _keep_config(c, args["HEAD_DIM"], args["seqlen"])]
    return kept or [configs[0]]


def _set_tma_block_shapes(nargs: dict[str, Any]) -> None:
    """Autotuner pre-hook: a TMA descriptor's box is the tile shape of the config."""
    head_dim = nargs["HEAD_DIM"]
    nargs["q_desc"].block_shape = [nargs["BLOCK_M"], head_dim]
    nargs["k_desc"].block_shape = [nargs["BLOCK_N"], head_dim]
    nargs["v_desc"].block_shape = [nargs["BLOCK_N"], head_dim]


_TUNE_KEY = ["seq_bucket", "HEAD_DIM", "CAUSAL"]  # the autotuner adds the tensors' dtypes
_PRUNE = {"early_config_prune": _prune_configs}
_flash_fwd_autotuned = triton.autotune(_make_configs(), key=_TUNE_KEY, prune_configs_by=_PRUNE)(
    _flash_fwd_kernel
)
_flash_fwd_tma_autotuned = triton.autotune(
    _make_configs(pre_hook=_set_tma_block_shapes), key=_TUNE_KEY, prune_configs_by=_PRUNE
)(_flash_fwd_kernel_tma)
_last: dict[str, Any] = {}  # which autotuner ran last (see last_autotune_config)


def autotune_configs() -> list[str]:
    """The configs the autotuner chooses among (before pruning), e.g. 'BM128 BN64 w8 s3'."""
    return [
        f"BM{c.kwargs['BLOCK_M']} BN{c.kwargs['BLOCK_N']} w{c.num_warps} s{c.num_stages}"
        for c in _make_configs()
    ]


def last_autotune_config() -> dict[str, Any] | None:
    """Path and config of the latest autotuned launch in this process, e.g.
    {"path": "tma", "block_m": 128, "block_n": 64, "num_warps": 8, "num_stages": 3}."""
    tuner = _last.get("tuner")
    best = getattr(tuner, "best_config", None)
    if best is None:
        return None
    return {
        "path": _last["path"],
        "block_m": best.kwargs["BLOCK_M"],
        "block_n": best.kwargs["BLOCK_N"],
        "num_warps": best.num_warps,
        "num_stages": best.num_stages,
    }


def last_autotune_choice() -> str | None:
    """last_autotune_config() as one short line, e.g. 'tma BM128 BN64 w8 s3'."""
    c = last_autotune_config()
    if c is None:
        return None
    return f"{c['path']} BM{c['block_m']} BN{c['block_n']} w{c['num_warps']} s{c['num_stages']}"


def _check_inputs(q: Any, k: Any, v: Any, softmax_scale: Any) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 4:
        raise ValueError(f"q must be 4-D [batch, seq, heads, head_dim], got shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            "q, k, v must have the same shape [batch, seq, heads, head_dim]; got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype must be torch.float16 or torch.bfloat16, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one dtype; got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    head_dim = q.shape[-1]
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {head_dim}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(
            f"q, k, v must be on one device; got q {q.device}, k {k.device}, v {v.device}"
        )
    if softmax_scale is not None and (
        not isinstance(softmax_scale, numbers.Real)
        or isinstance(softmax_scale, bool)
        or not math.isfinite(softmax_scale)
    ):
        raise ValueError(f"softmax_scale must be None or a finite number, got {softmax_scale!r}")
    if q.device.type != "cuda" and not _INTERPRET:
        raise ValueError(
            f"q, k, v must be CUDA tensors, got device {q.device} (to run on CPU, set "
            "TRITON_INTERPRET=1 before triton is imported: Triton's interpreter, slow)"
        )


def _tma_descriptors(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_m: int, block_n: int
) -> tuple[Any, Any, Any] | None:
    """TMA descriptors over the 2-D view [B*S, H*D] of q, k, v; None where that view or
    TMA's alignment rules (16-byte base and row stride) do not hold."""
    if TensorDescriptor is None:
        return None
    batch, seqlen, n_heads, head_dim = q.shape
    descs = []
    for t, rows in ((q, block_m), (k, block_n), (v, block_n)):
        sb, ss, sh, sd = t.stride()
        viewable = sd == 1 and sh == head_dim and (batch == 1 or sb == seqlen * ss)
        aligned = t.data_ptr() % 16 == 0 and (ss * t.element_size()) % 16 == 0
        if not (viewable and aligned):
            return None
        descs.append(
            TensorDescriptor(t, [batch * seqlen, n_heads * head_dim], [ss, 1], [rows, head_dim])
        )
    return descs[0], descs[1], descs[2]


def _tma_supported(device: torch.device) -> bool:
    """Hopper (sm_90) and newer have TMA; the interpreter runs the pointer path by default."""
    return (
        TensorDescriptor is not None
        and device.type == "cuda"
        and torch.cuda.get_device_capability(device)[0] >= 9
    )


def _launch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None,
    causal: bool,
    config: dict[str, Any] | None,
    use_tma: bool | None = None,
) -> torch.Tensor:
    """config None: autotune. use_tma None: TMA where supported and the layout allows."""
    _check_inputs(q, k, v, softmax_scale)
    batch, seqlen, n_heads, head_dim = q.shape
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # contiguous [B, S, H, D]
    if out.numel() == 0:
        return out
    if config is None and _INTERPRET:
        # The autotuner would time every config in the interpreter: pick one instead.
        config = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    meta = {} if config is None else dict(config)
    # Triton's interpreter (3.9) multiplies the raw uint16 storage of bf16 in tl.dot:
    # feed it the same bf16 values as fp32 instead. Compiled kernels never take this path.
    if _INTERPRET and q.dtype == torch.bfloat16:
        meta["UPCAST_DOT"] = True

    descs = None
    if use_tma or (use_tma is None and not _INTERPRET and _tma_supported(q.device)):
        # Placeholder boxes for the autotuned kernel: its pre-hook sets them per config.
        descs = _tma_descriptors(q, k, v, meta.get("BLOCK_M", 64), meta.get("BLOCK_N", 64))
        if descs is None and use_tma:
            raise ValueError(
                "use_tma=True needs [B*S, H*D]-viewable, 16-byte aligned q, k, v; got strides "
                f"{q.stride()}, {k.stride()}, {v.stride()}"
            )
    tail = (*out.stride(), triton.next_power_of_2(seqlen))
    if descs is not None:
        args = (*descs, out, scale, seqlen, n_heads, *tail)
        kernel, tuner, path = _flash_fwd_kernel_tma, _flash_fwd_tma_autotuned, "tma"
    else:
        args = (q, k, v, out, scale, seqlen, n_heads, *q.stride(), *k.stride(), *v.stride(), *tail)
        kernel, tuner, path = _flash_fwd_kernel, _flash_fwd_autotuned, "pointer"

    def grid(launch_meta: dict[str, Any]) -> tuple[int, int]:
        return (batch * n_heads, triton.cdiv(seqlen, launch_meta["BLOCK_M"]))

    on_cuda = q.device.type == "cuda"
    with torch.cuda.device(q.device) if on_cuda else contextlib.nullcontext():
        if config is None:
            tuner[grid](*args, HEAD_DIM=head_dim, CAUSAL=bool(causal), **meta)
            _last.update(tuner=tuner, path=path)
        else:
            kernel[grid](*args, HEAD_DIM=head_dim, CAUSAL=bool(causal), **meta)
    return out


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """softmax(q k^T * scale [+ causal mask]) v for q, k, v of shape [batch, seq, heads, head_dim].

    fp16 or bf16, head_dim in {16, 32, 64, 128, 256}, any strides. `causal` is the
    top-left aligned mask (query i sees keys j <= i), as SDPA's is_causal=True.
    softmax_scale defaults to 1/sqrt(head_dim). Returns a new contiguous tensor of q's
    shape and dtype. Tiles come from Triton's autotuner (keyed on head_dim, causal, dtype
    and the next power of two of seq); on Hopper, inputs whose heads and head_dim are
    contiguous load through TMA, other layouts through plain pointer loads.
    """
    return _launch(q, k, v, softmax_scale, causal, None)


def flash_attn_func_with_config(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
    *,
    block_m: int = 64,
    block_n: int = 64,
    num_warps: int = 4,
    num_stages: int = 2,
    use_tma: bool = False,
    split_diagonal: bool = True,
    heavy_first: bool = True,
) -> torch.Tensor:
    """As `flash_attn_func`, with the launch fixed (no autotuning), for tests and benchmarks.

    use_tma: load through TMA descriptors (needs [B*S, H*D]-viewable inputs; the Triton
    interpreter runs it too) instead of pointer loads. split_diagonal=False masks every key
    tile; heavy_first=False launches causal query tiles in sequence order.
    """
    config = {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "num_warps": num_warps,
        "num_stages": num_stages,
        "SPLIT_DIAGONAL": split_diagonal,
        "HEAVY_FIRST": heavy_first,
    }
    return _launch(q, k, v, softmax_scale, causal, config, use_tma=use_tma)
