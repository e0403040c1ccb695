"""Which tile a program takes, and which tiles of the other axis it visits: every kernel's.

Query i sees keys j with i + lo_diag <= j <= i + hi_diag (flash_common.Window). For a tile of
rows [first, last] the visited columns split into three ranges of BLOCK-aligned tiles:
masked [lo, full_lo), unmasked [full_lo, full_hi) (every row sees every column, and all
columns exist), masked [full_hi, hi). Tiles outside [lo, hi) are never loaded.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _visit_bounds(first, last, n_rows, n_cols, lo_diag, hi_diag, BLOCK: tl.constexpr):
    """(lo, full_lo, full_hi, hi) over columns [0, n_cols) for rows [first, last]: row r sees
    columns c with r + lo_diag <= c <= r + hi_diag. Rows from n_rows on are padding: they
    must not move the bounds (an unbounded side is only q_len + kv_len away)."""
    last = tl.minimum(last, n_rows - 1)
    lo = tl.maximum(first + lo_diag, 0) // BLOCK * BLOCK
    hi = tl.maximum(tl.minimum(last + hi_diag + 1, n_cols), lo)  # == lo: the tile sees nothing
    full_lo = tl.cdiv(tl.maximum(last + lo_diag, 0), BLOCK) * BLOCK
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.maximum(tl.minimum(first + hi_diag + 1, n_cols), 0) // BLOCK * BLOCK
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return lo, full_lo, full_hi, hi


@triton.jit
def _launch_tile(HEAVY_FIRST: tl.constexpr, L2_GROUP: tl.constexpr):
    """(pair, tile) of this program in a grid of (batch x head pairs, tiles of rows).

    L2_GROUP 0: pair = axis 0, tile = axis 1 (the hardware starts programs with axis 0
    fastest, so one wave holds every head at a few tiles, and each K/V head is read from
    DRAM again for each wave). L2_GROUP g > 0: the launch order walks g pairs at a time
    through all their tiles, so a wave holds the tiles of a few heads, whose K/V stay in L2
    (FlashAttention-3's and Triton's grouped-GEMM swizzle). HEAVY_FIRST reverses the tiles
    (causal: the last query tiles see the most keys)."""
    n_pairs, n_tiles = tl.num_programs(0), tl.num_programs(1)
    if L2_GROUP == 0:
        pair = tl.program_id(0)
        tile = tl.program_id(1)
    else:
        launched = tl.program_id(1) * n_pairs + tl.program_id(0)
        per_group = L2_GROUP * n_tiles
        first_pair = launched // per_group * L2_GROUP
        width = tl.minimum(n_pairs - first_pair, L2_GROUP)  # the last group may be narrower
        within = launched % per_group
        pair = first_pair + within % width
        tile = within // width
    if HEAVY_FIRST:
        tile = n_tiles - 1 - tile
    return pair, tile


@triton.jit
def _sees(keep, key, query, lo_diag, hi_diag, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """`keep` narrowed to the keys each query sees: query i sees key j when
    i + lo_diag <= j <= i + hi_diag (the right bound if CAUSAL, both if WINDOW). key and query
    broadcast against each other: every masked tile of every kernel asks this one rule."""
    if CAUSAL:
        keep = keep & (key <= query + hi_diag)
    if WINDOW:
        keep = keep & (key >= query + lo_diag)
        keep = keep & (key <= query + hi_diag)
    return keep
