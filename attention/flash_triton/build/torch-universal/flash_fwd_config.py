"""The forward's autotune configs and how they are pruned per launch (flash_fwd.py)."""

from __future__ import annotations

from typing import Any

import triton

from .flash_common import checked_l2_group


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


# Triton's tutorial 06 tile: the TMA kernel (flash_tma.py, no pointer arithmetic) fits it at
# head_dim 128 and ran 6-7% faster than any other config on an H100; the pointer kernel spills
# there (4.3x slower). docs/flash-triton-notes.md, "Our kernels at the tutorial's tile".
TMA_ONLY_TILE = (128, 64, 4, 2)


def _fits(config: triton.Config, head_dim: int, tma: bool = False) -> bool:
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    if (bm, bn, config.num_warps, config.num_stages) == TMA_ONLY_TILE:
        return tma and head_dim <= 128
    if head_dim >= 256:  # q tile + 2 stages of k/v tiles: 192 KB of shared memory
        return config.num_stages == 2 and config.num_warps == 8
    if config.num_stages == 2:
        return False  # slowest config at every measured shape
    return not (head_dim >= 128 and config.num_warps == 4 and bm * bn > 64 * 64)  # spills


def _prune_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    return _pruned(configs, {**named_args, **kwargs}, tma=False)


def _prune_tma_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    return _pruned(configs, {**named_args, **kwargs}, tma=True)


def _pruned(configs: list[triton.Config], args: dict[str, Any], tma: bool) -> list[triton.Config]:
    kept = [c for c in configs if _fits(c, args["HEAD_DIM"], tma)]
    if args["seqlen_q"] <= 64:  # one 64-row tile covers the sequence; bigger ones only pad
        small = [c for c in kept if c.kwargs["BLOCK_M"] <= 64 and c.kwargs["BLOCK_N"] <= 64]
        kept = small or kept
    return kept or [configs[0]]


# The forward's launch order (flash_bounds._launch_tile) where K/V pass L2
# (flash_common.launch_group): 16 (batch, head) pairs through all their query tiles at a time.
# H100, step 9 (docs/flash-triton-notes.md): B4 H16 S4096 D128 681 -> 619 us (groups of 8 and
# 16 alike), GQA H32/KV8 1,273 -> 1,190 (16; 8: 1,219), window 512 269 -> 245.
FORWARD_L2_GROUP = 16


def fixed_config(
    block_m: int,
    block_n: int,
    num_warps: int,
    num_stages: int,
    split_diagonal: bool,
    heavy_first: bool,
    overlap: bool | None = None,
    pack_gqa: bool | None = None,
    tma: bool | None = None,
    warp_specialize: bool | None = None,
    l2_group: int | None = None,
) -> dict[str, Any]:
    """The meta-parameters of a fixed (not autotuned) forward launch; overlap, pack_gqa, tma,
    warp_specialize and l2_group None keep the launch defaults (flash_fwd's OVERLAP_UNMASKED,
    pack_gqa(), TMA_FORWARD, TMA_WARP_SPEC; FORWARD_L2_GROUP)."""
    meta: dict[str, Any] = {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "num_warps": num_warps,
        "num_stages": num_stages,
        "SPLIT_DIAGONAL": split_diagonal,
        "HEAVY_FIRST": heavy_first,
    }
    if overlap is not None:
        meta["OVERLAP"] = overlap
    if pack_gqa is not None:
        meta["PACK_GQA"] = pack_gqa
    if tma is not None:
        meta["TMA"] = tma
    if warp_specialize is not None:
        meta["WARP_SPEC"] = warp_specialize
    if l2_group is not None:
        meta["L2_GROUP"] = checked_l2_group(l2_group)
    return meta
