"""Which tiles of the other axis a tile of rows must visit, shared by every kernel.

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
