"""Launch configs of the backward kernels (flash_bwd.py): tile sizes, warps, pipeline stages."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .flash_common import INTERPRET, checked_l2_group


@dataclass(frozen=True)
class TileConfig:
    """One backward kernel's launch: block_m query rows and block_n key rows per tile."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    tma: bool = False  # Q/dO/K/V moved by TMA (flash_bwd_tma.py), where flash_tma.eligible
    l2_group: int = 0  # launch order: (batch, head) pairs walked together (flash_bounds)
    # the pointer dK/dV kernel's masked tiles read clamped rows, not masked loads (step 13's
    # candidate, off until timed on a GPU: docs/flash-triton-notes.md)
    clamp_rows: bool = False

    def short(self) -> str:
        tma = " tma" if self.tma else ""
        group = f" g{self.l2_group}" if self.l2_group else ""
        clamp = " clamp" if self.clamp_rows else ""
        tile = f"BM{self.block_m} BN{self.block_n} w{self.num_warps} s{self.num_stages}"
        return f"{tile}{tma}{group}{clamp}"


@dataclass(frozen=True)
class BackwardConfig:
    """dkdv: block_n keys stay resident while block_m-row query tiles stream past (block_n must
    be a multiple of block_m); dq: the reverse (block_m a multiple of block_n)."""

    dkdv: TileConfig
    dq: TileConfig
    # dQ summed by fp32 atomics in the dK/dV pass (FlashAttention-2's way): 5 GEMMs a tile pair
    # instead of 7, no dQ pass (its tile unused), at the price of atomic traffic; off by default
    atomic_dq: bool = False
    # with atomic_dq: each tile pair's dQ added by one TMA bulk reduction, not scalar atomics
    # (step 14, Hopper; the interpreter has no TMA reductions and takes the scalar atomics)
    tma_dq: bool = False

    def short(self) -> str:
        if self.atomic_dq:
            how = "TMA reductions" if self.tma_dq else "atomics"
            return f"dkdv {self.dkdv.short()}, dQ by {how}"
        return f"dkdv {self.dkdv.short()}; dq {self.dq.short()}"


# The backward kernels' launch order (flash_bounds._launch_tile) where K/V pass L2
# (flash_common.launch_group): 8 (batch, head) pairs through all their tiles at a time. H100,
# B4 H16 S4096 D128 (docs/flash-triton-notes.md, step 9): the backward alone 2,233 us in the
# grid's order, 2,127 / 2,133 / 2,184 in groups of 4 / 8 / 16; the train step best at 8.
BACKWARD_L2_GROUP = 8


def default_backward_config(head_dim: int, group: int = 0) -> BackwardConfig:
    """default_tiles(head_dim), both kernels in launch order `group` (0: the grid's own)."""
    tiles = default_tiles(head_dim)
    if not group:
        return tiles
    return BackwardConfig(replace(tiles.dkdv, l2_group=group), replace(tiles.dq, l2_group=group))


def default_tiles(head_dim: int) -> BackwardConfig:
    """Fixed launches per head_dim (no autotuning: a backward call costs no tuning time).

    Picked from an offline sm_90 compile (Triton 3.9: no register spills, or the fewest) and
    the H200 survey in benchmarks/bench_flash_triton_bwd.py (docs/flash-triton-notes.md).
    """
    if INTERPRET:  # few, large programs: the interpreter's cost is per operation
        return BackwardConfig(TileConfig(32, 64, 4, 1), TileConfig(64, 32, 4, 1))
    if head_dim >= 256:  # 24 B of spill in dkdv, the least of those tried
        return BackwardConfig(TileConfig(16, 32, 4, 2), TileConfig(64, 16, 8, 2))
    # H200, B4 H16 S4096 D128 bf16 causal, each kernel alone: dkdv BM32 BN64 w4 s3 1216 us
    # (5 others 1376-1915 us), dq BM128 BN64 w8 s3 743 us (5 others 853-1097 us). Head dims
    # below 128 (not surveyed) take the same tiles: they hold fewer registers.
    if head_dim <= 64:
        return BackwardConfig(TileConfig(32, 64, 4, 3), TileConfig(128, 64, 8, 3))
    # H100 survey of 21 dK/dV tiles (step 7, docs/flash-triton-notes.md): 128 resident keys over
    # 8 warps halve the query tiles each key tile streams past: the backward 2,345 -> 2,161 us.
    return BackwardConfig(TileConfig(64, 128, 8, 3), TileConfig(128, 64, 8, 3))


def check_backward_config(config: BackwardConfig) -> None:
    """Tile sizes the loops' alignment relies on (see BackwardConfig)."""
    for name, tile in (("dkdv", config.dkdv), ("dq", config.dq)):
        sizes = (tile.block_m, tile.block_n)
        if any(x < 16 or x & (x - 1) for x in sizes):
            raise ValueError(f"{name} block sizes must be powers of two >= 16, got {sizes}")
        checked_l2_group(tile.l2_group, f"{name} l2_group")
    if config.tma_dq and not config.atomic_dq:
        raise ValueError("tma_dq adds dQ in the dK/dV pass: it needs atomic_dq=True")
    if config.dkdv.block_n % config.dkdv.block_m:
        raise ValueError(f"dkdv block_n must be a multiple of block_m: {config.dkdv.short()}")
    if config.dq.block_m % config.dq.block_n:
        raise ValueError(f"dq block_m must be a multiple of block_n: {config.dq.short()}")
