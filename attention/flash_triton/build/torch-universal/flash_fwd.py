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

from . import flash_fwd_config, flash_gluon_ws
from .flash_bounds import _launch_tile, _visit_bounds
from .flash_common import (
    INTERPRET,
    SUPPORTED_DTYPES,
    SUPPORTED_HEAD_DIMS,
    check_inputs,
    device_scope,
    launch_group,
    resolve_scale,
    resolve_window,
    upcast_dot,
)
from .flash_fwd_config import _make_configs, _prune_configs, fixed_config
from .flash_tiles import _attn_tiles, _attn_tiles_overlap
from .flash_tma import eligible as tma_eligible
from .flash_tma import launch_tma

# re-exported: older imports, and flash_autograd's fixed launches
__all__ = ["SUPPORTED_DTYPES", "SUPPORTED_HEAD_DIMS", "fixed_config"]


@triton.jit
def _attend_range(
    q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
    offs_m, first, last, lo_cap, hi_cap, seqlen_k, lo_diag, hi_diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, MAY_BE_EMPTY: tl.constexpr,
    SPLIT_DIAGONAL: tl.constexpr, UPCAST_DOT: tl.constexpr, OVERLAP: tl.constexpr = False,
):  # fmt: skip
    """(acc, l_i, m_i) of query rows at positions offs_m (in [first, last]) over the keys they
    see within [lo_cap, hi_cap) (lo_cap BLOCK_N-aligned): the edge tiles masked, the tiles
    every row sees whole unmasked; tiles no row sees are skipped. OVERLAP runs the unmasked
    tiles through _attn_tiles_overlap (the next tile's Q K^T issued before this one's softmax)."""
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
    if OVERLAP:  # tiles every row sees whole, pipelined by one tile
        acc, l_i, m_i = _attn_tiles_overlap(
            acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
            full_lo, full_hi, qk_scale, HEAD_DIM, BLOCK_N, UPCAST_DOT,
        )  # fmt: skip
    else:  # tiles every row sees whole: no mask at all
        acc, l_i, m_i = _attn_tiles(
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


@triton.jit
def _query_tile(pid_bh, pid_m, seqlen_q, n_heads, group, BLOCK_M: tl.constexpr,
                PACK_GQA: tl.constexpr):  # fmt: skip
    """Which query rows a forward program owns: (positions, row_ok, first and last position,
    batch, K/V head, query head of each row, LSE row index of each row), int64 where offsets
    can pass 2**31 elements.

    Plain: program (batch, head) x BLOCK_M consecutive positions of that head. PACK_GQA:
    program (batch, K/V head) x BLOCK_M rows, row r = position r // group of query head
    kv_head * group + r % group (as the decode path packs them). Meant to buy: the group's
    query heads share each K/V tile, so a K/V tile is loaded once per group instead of once
    per query head (a quarter of the K/V traffic from L2 at 32/8 heads); the causal band
    then spans BLOCK_M / group positions per tile. Not measured on a GPU yet, so off by
    default (PACK_GQA_DEFAULT); an offline sm_90 compile (Triton 3.9) shows it costs
    registers: 255 + 200 B of spill at BM128 BN128 w8 (plain: 255 + 32 B), 255 at BM128
    BN64 w8 (plain: 228)."""
    r0 = pid_m * BLOCK_M  # first row of this tile
    rows = r0 + tl.arange(0, BLOCK_M)
    if PACK_GQA:
        kv_heads = n_heads // group
        b = (pid_bh // kv_heads).to(tl.int64)
        kv_h = (pid_bh % kv_heads).to(tl.int64)
        n_rows = seqlen_q * group
        offs_m = rows // group  # (BLOCK_M,) query positions
        head = kv_h * group + rows % group  # (BLOCK_M,) query heads
        first = r0 // group
        last = (tl.minimum(r0 + BLOCK_M, n_rows) - 1) // group
        lse_rows = (b * n_heads + head) * seqlen_q + offs_m
    else:
        b = (pid_bh // n_heads).to(tl.int64)
        h = pid_bh % n_heads
        head = h.to(tl.int64)  # one query head
        kv_h = (h // group).to(tl.int64)
        n_rows = seqlen_q
        offs_m = rows  # (BLOCK_M,) query positions
        first = r0
        last = tl.minimum(r0 + BLOCK_M, seqlen_q) - 1
        lse_rows = pid_bh.to(tl.int64) * seqlen_q + offs_m
    return offs_m, rows < n_rows, first, last, b, kv_h, head, lse_rows


@triton.jit
def _bshd_rows(base, b, first, offs_m, head, stride_b, stride_s, stride_h, stride_d,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, PACK_GQA: tl.constexpr):  # fmt: skip
    """(BLOCK_M, HEAD_DIM) pointers to a tile's rows (b, position offs_m, head) of a
    [B, S, H, D] tensor: a gather of rows per packed (position, head) with PACK_GQA; else one
    head's consecutive positions from `first`, int64 base and int32 offsets within it."""
    offs_d = tl.arange(0, HEAD_DIM)
    if PACK_GQA:
        rows = b * stride_b + offs_m.to(tl.int64) * stride_s + head * stride_h  # (BLOCK_M,)
        ptrs = base + rows[:, None] + offs_d[None, :] * stride_d
    else:
        offs_mt = tl.arange(0, BLOCK_M)  # row within the tile
        ptrs = (
            base + b * stride_b + head * stride_h + first.to(tl.int64) * stride_s
            + (offs_mt[:, None] * stride_s + offs_d[None, :] * stride_d)
        )  # fmt: skip
    return ptrs


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
    MAY_BE_EMPTY: tl.constexpr = False, OVERLAP: tl.constexpr = False,
    PACK_GQA: tl.constexpr = False, L2_GROUP: tl.constexpr = 0,
):  # fmt: skip
    """One program = one (batch, head) pair x one tile of BLOCK_M query rows; with PACK_GQA
    one (batch, K/V head) pair x BLOCK_M rows of its group's query heads (_query_tile).

    Query head h reads K/V head h // group (GQA: no copies). STORE_LSE (training only) also
    writes each row's natural log-sum-exp of the scaled scores to Lse, a contiguous fp32
    [batch, heads, seqlen_q] tensor (+inf for a row that sees no key); inference compiles it out.
    """
    # Causal tiles near the end of the sequence see the most keys: launch them first, so the
    # short ones fill the last wave; L2_GROUP: the launch order that keeps K/V in L2.
    pid_bh, pid_m = _launch_tile(CAUSAL and HEAVY_FIRST, L2_GROUP)
    offs_m, row_ok, first, last, b, kv_h, head, lse_rows = _query_tile(
        pid_bh, pid_m, seqlen_q, n_heads, group, BLOCK_M, PACK_GQA
    )
    k_base = K + b * stride_kb + kv_h * stride_kh
    v_base = V + b * stride_vb + kv_h * stride_vh
    # q stays in registers/shared memory for the whole key loop.
    q_ptrs = _bshd_rows(
        Q, b, first, offs_m, head, stride_qb, stride_qs, stride_qh, stride_qd,
        HEAD_DIM, BLOCK_M, PACK_GQA,
    )  # fmt: skip
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)  # (BLOCK_M, D)
    # exp(x) == exp2(x * log2(e)): fold log2(e) into the scale once, then use exp2.
    acc, l_i, m_i = _attend_range(
        q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
        offs_m, first, last, 0, seqlen_k, seqlen_k, lo_diag, hi_diag,
        softmax_scale * 1.4426950408889634, HEAD_DIM, BLOCK_M, BLOCK_N,
        CAUSAL, WINDOW, MAY_BE_EMPTY, SPLIT_DIAGONAL, UPCAST_DOT, OVERLAP,
    )  # fmt: skip
    if MAY_BE_EMPTY:  # noqa: SIM108 (constexpr) a row that saw no key: acc = 0, out 0
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    else:  # every row saw at least one key, so l_i > 0 (padded rows are not stored)
        out = acc / l_i[:, None]  # (BLOCK_M, D)
    # Output pointers built here, after the loop, so they hold no registers during it.
    o_ptrs = _bshd_rows(
        Out, b, first, offs_m, head, stride_ob, stride_os, stride_oh, stride_od,
        HEAD_DIM, BLOCK_M, PACK_GQA,
    )  # fmt: skip
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    if STORE_LSE:  # log(sum_j e^(s_ij)) = (m_i + log2 l_i) * ln 2, back from log2 units
        lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
        lse = tl.where(l_i == 0.0, float("inf"), lse)  # no key: the backward's P is 0
        tl.store(Lse + lse_rows, lse, mask=row_ok)


_flash_fwd_autotuned = triton.autotune(
    configs=_make_configs(),
    # + tensors' dtypes; PACK_GQA: a packed GQA launch tunes apart from a plain one
    key=["seq_bucket", "kv_bucket", "HEAD_DIM", "CAUSAL", "WINDOW", "OVERLAP", "PACK_GQA"],
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


# Launch defaults of the forward's two issue-44 candidates. Both stay off until a GPU A/B
# shows a win (benchmarks/bench_flash_triton_ab.py decides and logs it; none has run yet:
# docs/flash-triton-notes.md, "Issue 44"). A fixed launch may force either (fixed_config).
OVERLAP_UNMASKED = False  # the unmasked tiles through _attn_tiles_overlap
PACK_GQA_DEFAULT = False  # GQA/MQA: the group's query heads packed into one tile's rows
# Issue 44's third candidate (flash_tma.py): Q/K/V/O through TMA tensor descriptors, and
# optionally Triton's warp specialisation of its unmasked loop. TMA_FORWARD sends every head
# dim there (the A/B's --tma mode writes both lines with --patch). By default it takes what
# it won on an H100 with the tutorial's tile (docs/flash-triton-notes.md): head_dim 128, no
# window, q_len >= 4096 (-7% MHA, -6% GQA); it lost with a 512 window (+12%) and at q_len 1024.
TMA_FORWARD = False
TMA_WARP_SPEC = False
TMA_HEAD_DIMS = (128,)
TMA_MIN_SEQLEN = 4096
# Step 12 (flash_gluon_ws.py): the warp-specialised Gluon forward, a producer warp and two
# consumer warpgroups in ping-pong, took the same shapes from the TMA kernel on an H100
# (session 10): causal 600.6 -> 540.7 us (cuDNN 517.4), GQA 1,157.5 -> 1,068.3, non-causal
# 1,123.3 -> 958.5; BN128, 2 stages, 8 pairs a launch group. Where it cannot run (not sm_90,
# a Triton without Gluon's pieces, a non-contiguous q), those shapes stay on TMA.
GLUON_WS_FORWARD = True


def pack_gqa(n_heads: int, kv_heads: int) -> bool:
    """Whether a forward packs each group's query heads into one tile's rows (GQA/MQA only)."""
    return PACK_GQA_DEFAULT and n_heads > kv_heads


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
    if config is None and _takes_gluon_ws(q, k, v, window.windowed):
        with device_scope(q):
            out, ws_lse = flash_gluon_ws.gluon_ws_forward(
                q, k, v, scale, causal, return_lse, block_n=128, stages=2,
                l2_group=launch_group(k, 8),
            )  # fmt: skip
        return out, None if ws_lse is None else ws_lse.view(batch, n_heads, seqlen_q)
    if config is None and INTERPRET:
        # The autotuner would time every config in the interpreter: pick one instead.
        config = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    meta = {"OVERLAP": OVERLAP_UNMASKED, "PACK_GQA": pack_gqa(n_heads, kv_heads),
            "L2_GROUP": launch_group(k, flash_fwd_config.FORWARD_L2_GROUP)}  # fmt: skip
    meta.update(config or {})
    tma = _takes_tma(meta, q, k, v, window.windowed)
    if upcast_dot(q.dtype):  # the CPU interpreter's bf16 tl.dot bug (flash_common.upcast_dot)
        meta["UPCAST_DOT"] = True
    strides = [x.stride()[: 3 if tma else 4] for x in (q, k, v, out)]  # TMA: last one is 1
    args = (
        q, k, v, out, _lse_stand_in(q.device) if lse is None else lse, scale, seqlen_q,
        seqlen_k, n_heads, n_heads // kv_heads, window.lo_diag, window.hi_diag,
        *[s for x in strides for s in x],
        triton.next_power_of_2(seqlen_q), triton.next_power_of_2(seqlen_k),
    )  # fmt: skip

    def grid(launch_meta: dict[str, Any]) -> tuple[int, int]:
        if launch_meta.get("PACK_GQA"):  # (batch, K/V head) x tiles of the group's packed rows
            rows = seqlen_q * (n_heads // kv_heads)
            return (batch * kv_heads, triton.cdiv(rows, launch_meta["BLOCK_M"]))
        return (batch * n_heads, triton.cdiv(seqlen_q, launch_meta["BLOCK_M"]))

    flags = {"HEAD_DIM": head_dim, "CAUSAL": bool(causal), "STORE_LSE": return_lse,
             "WINDOW": window.windowed, "MAY_BE_EMPTY": window.may_be_empty}  # fmt: skip
    kernel = _flash_fwd_autotuned if config is None else _flash_fwd_kernel
    with device_scope(q):
        if tma:
            launch_tma(args, grid, config is None, flags | meta)
        else:
            kernel[grid](*args, **flags, **meta)
    return out, lse


def _takes_gluon_ws(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windowed: bool) -> bool:
    """Whether the default route sends a forward to flash_gluon_ws (GLUON_WS_FORWARD): the
    shapes it won (those TMA_HEAD_DIMS / TMA_MIN_SEQLEN send to TMA), where it can run."""
    won = q.shape[-1] in TMA_HEAD_DIMS and not windowed and q.shape[1] >= TMA_MIN_SEQLEN
    return (
        GLUON_WS_FORWARD and won and not INTERPRET and q.is_contiguous()
        and flash_gluon_ws.available() and tma_eligible(q, k, v)
    )  # fmt: skip


def _takes_tma(
    meta: dict[str, Any], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windowed: bool
) -> bool:
    """Whether a launch goes to flash_tma's kernel (meta's TMA; by default TMA_FORWARD, or
    where it won: a head dim in TMA_HEAD_DIMS, no window, q_len >= TMA_MIN_SEQLEN), and meta
    made right for the kernel it goes to. Shapes and launches that kernel does not handle
    stay on this one: packed GQA, the overlap and unsplit-diagonal variants, tensors TMA
    cannot address (flash_tma.eligible)."""
    tma, warp_spec = meta.pop("TMA", None), meta.pop("WARP_SPEC", TMA_WARP_SPEC)
    if tma is None:
        won = q.shape[-1] in TMA_HEAD_DIMS and not windowed and q.shape[1] >= TMA_MIN_SEQLEN
        tma = TMA_FORWARD or won
    variants = meta["PACK_GQA"] or meta["OVERLAP"] or not meta.get("SPLIT_DIAGONAL", True)
    if not tma or variants or not tma_eligible(q, k, v):
        return False
    for name in ("PACK_GQA", "OVERLAP", "SPLIT_DIAGONAL"):
        meta.pop(name, None)
    meta["WARP_SPEC"] = bool(warp_spec)
    return True
