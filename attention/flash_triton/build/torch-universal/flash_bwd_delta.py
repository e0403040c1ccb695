"""The backward's first kernel, delta_i = rowsum(dO * O)_i (read by both gradient passes), and
the row pointers every backward kernel loads its resident tiles through."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["seqlen", "n_heads"])
def _flash_bwd_preprocess(
    Out, DOut, Delta, seqlen, n_heads,
    stride_ob, stride_os, stride_oh, stride_od,
    stride_dob, stride_dos, stride_doh, stride_dod,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    """delta_i = sum_d dO_id * O_id for BLOCK_M rows of one (batch, head), fp32 [B, H, S]."""
    pid_bh = tl.program_id(0)
    m0 = tl.program_id(1) * BLOCK_M
    b = pid_bh // n_heads
    h = pid_bh % n_heads
    offs_mt = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = m0 + offs_mt < seqlen
    o_ptrs = (
        Out + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh
        + m0.to(tl.int64) * stride_os
        + (offs_mt[:, None] * stride_os + offs_d[None, :] * stride_od)
    )  # fmt: skip
    do_ptrs = (
        DOut + b.to(tl.int64) * stride_dob + h.to(tl.int64) * stride_doh
        + m0.to(tl.int64) * stride_dos
        + (offs_mt[:, None] * stride_dos + offs_d[None, :] * stride_dod)
    )  # fmt: skip
    o = tl.load(o_ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    delta = tl.sum(o * do, 1)  # (BLOCK_M,)
    tl.store(Delta + pid_bh.to(tl.int64) * seqlen + m0 + offs_mt, delta, mask=row_ok)


@triton.jit
def _row_ptrs(base, row0, stride_s, stride_d, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Pointers to rows [row0, row0 + ROWS) x all features of one (batch, head)'s [seq, D]
    matrix at base; the row offset in int64 (long sequences)."""
    offs_r = tl.arange(0, ROWS)
    offs_d = tl.arange(0, HEAD_DIM)
    return (
        base + tl.cast(row0, tl.int64) * stride_s
        + (offs_r[:, None] * stride_s + offs_d[None, :] * stride_d)
    )  # fmt: skip


@triton.jit
def _load_rows(base, row0, stride_s, stride_d, seqlen, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr):
    """The (ROWS, HEAD_DIM) tile of rows from row0 (as _row_ptrs), zeros past seqlen."""
    rows_ok = row0 + tl.arange(0, ROWS) < seqlen
    ptrs = _row_ptrs(base, row0, stride_s, stride_d, ROWS, HEAD_DIM)
    return tl.load(ptrs, mask=rows_ok[:, None], other=0.0)
