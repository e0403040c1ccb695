"""Issue 44's launch order (flash_bounds._launch_tile, `l2_group`): which (batch x head pair,
row tile) each program of a kernel takes. With a group size g the launch walks g pairs through
all their tiles before the next g, so that a wave of programs shares a few heads' K/V in L2.

Two checks under Triton's interpreter: the map itself against an order written out here
(every (pair, tile) exactly once, in the order asked, heavy tiles first where asked); and every
kernel launched in a grouped order against float64, forward and gradients (a pair or tile
taken twice leaves another's rows unwritten: the output is wrong)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from tests.attention.test_flash_triton import run_interpreted
from tests.attention.test_flash_triton_shapes import case, check, run_case

try:
    import triton
    import triton.language as tl
except ImportError:  # run_interpreted skips, and says why
    triton = None

if triton is not None:

    @triton.jit
    def _record_launch_order(Pairs, Tiles, HEAVY_FIRST: tl.constexpr, L2_GROUP: tl.constexpr):
        """Writes, at each program's launch index, the (pair, tile) _launch_tile gives it."""
        pair, tile = _launch_tile(HEAVY_FIRST, L2_GROUP)  # noqa: F821 (set by launch_map)
        launched = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
        tl.store(Pairs + launched, pair)
        tl.store(Tiles + launched, tile)


def launch_map(mod: types.ModuleType, c: dict[str, Any]) -> dict[str, Any]:
    """[(pair, tile)] in launch order for a (pairs, tiles) grid (the interpreter's child)."""
    import torch

    globals()["_launch_tile"] = mod.flash_bounds._launch_tile
    n = c["pairs"] * c["tiles"]
    pairs, tiles = torch.full((n,), -1, dtype=torch.int32), torch.full((n,), -1, dtype=torch.int32)
    _record_launch_order[(c["pairs"], c["tiles"])](pairs, tiles, c["heavy_first"], c["group"])
    return {"order": list(zip(pairs.tolist(), tiles.tolist(), strict=True))}


def expected_order(pairs: int, tiles: int, group: int, heavy_first: bool) -> list[list[int]]:
    """The order asked for, written out: group 0 is the grid's own (pairs fastest)."""
    flip = (lambda t: tiles - 1 - t) if heavy_first else (lambda t: t)
    if group == 0:
        return [[p, flip(t)] for t in range(tiles) for p in range(pairs)]
    order = []
    for first in range(0, pairs, group):
        members = range(first, min(first + group, pairs))
        order += [[p, flip(t)] for t in range(tiles) for p in members]
    return order


MAPS = {  # (pairs, tiles, group, heavy_first)
    "8 pairs 5 tiles group 3 heavy first": (8, 5, 3, True),  # a narrower last group
    "4 pairs 7 tiles group 4": (4, 7, 4, False),
    "3 pairs 4 tiles group 8 heavy first": (3, 4, 8, True),  # one group, narrower than asked
    "5 pairs 3 tiles group 1": (5, 3, 1, False),  # one pair at a time: each pair's tiles in turn
    "6 pairs 2 tiles, the grid's order, heavy first": (6, 2, 0, True),
}

# Every kernel in a grouped order: the plain and TMA forwards, packed GQA, and the pointer
# and TMA backward kernels; groups that do not divide the pairs, and one wider than them all.
GROUPED = {
    "plain-gqa-causal-group3-grad": case(
        70, 70, 4, 2, causal=True, B=2, path="fixed", tiles=16, grad=True, seed=40,
        config={"l2_group": 3, "bwd": [[16, 32, 3], [32, 16, 3]]},
    ),
    "tma-mqa-q<kv-window-bf16-group5-grad": case(
        40, 100, 2, 1, "bfloat16", causal=True, window=(30, -1), path="fixed", tiles=16,
        grad=True, seed=41,
        config={"tma": True, "l2_group": 5, "bwd_tma": [[16, 32, 2], [32, 16, 2]]},
    ),
    "packed-gqa-causal-group2": case(
        70, 70, 4, 2, causal=True, B=3, path="fixed", tiles=16, seed=42,
        config={"pack_gqa": True, "l2_group": 2},
    ),
    "full-q>kv-fp16-group2-grad": case(
        90, 30, 4, 2, B=2, path="fixed", tiles=16, grad=True, seed=43,
        config={"l2_group": 2, "bwd": [[16, 16, 1], [16, 16, 4]]},
    ),
}  # fmt: skip


def run_grouped(mod: types.ModuleType, c: dict[str, Any]) -> dict[str, Any]:
    """run_case with the backward's tiles ([block_m, block_n, l2_group] for dK/dV and dQ)
    built here; the forward's l2_group goes to flash_attn_func_with_config as it is."""
    config = dict(c["config"])
    for key, tma in (("bwd", False), ("bwd_tma", True)):
        if key in config:
            dkdv, dq = (
                mod.TileConfig(bm, bn, 4, 1, tma=tma, l2_group=g) for bm, bn, g in config.pop(key)
            )
            config["backward_config"] = mod.BackwardConfig(dkdv, dq)
    return run_case(mod, {**c, "config": config})


class Spy:
    """Stands in for a kernel in its module: records each launch's L2_GROUP, then launches."""

    def __init__(self, kernel: Any, seen: list) -> None:
        self.kernel, self.seen = kernel, seen

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            self.seen.append(kwargs.get("L2_GROUP"))
            return self.kernel[grid](*args, **kwargs)

        return launch


def routed(mod: types.ModuleType, c: dict[str, Any]) -> dict[str, Any]:
    """flash_attn_func's own route (forward and backward) with L2 said to hold c["l2"] bytes:
    each kernel's L2_GROUP as launched, and the errors against float64."""
    import torch

    mod.flash_common._L2_BYTES[torch.device("cpu")] = c["l2"]
    seen: dict[str, list] = {"forward": [], "dkdv": [], "dq": []}
    places = {
        "forward": (mod.flash_fwd, "_flash_fwd_kernel"),
        "dkdv": (mod.flash_bwd, "_flash_bwd_dkdv"),
        "dq": (mod.flash_bwd, "_flash_bwd_dq"),
    }
    real = {name: getattr(module, attr) for name, (module, attr) in places.items()}
    for name, (module, attr) in places.items():
        setattr(module, attr, Spy(real[name], seen[name]))
    try:
        res = run_case(mod, c["case"])
    finally:
        for name, (module, attr) in places.items():
            setattr(module, attr, real[name])
        del mod.flash_common._L2_BYTES[torch.device("cpu")]
    return {**res, "groups": seen}


ROUTED = {  # K and V of this case: 2 x 70 x 2 x 64 x 2 bytes = 35,840
    name: {"l2": l2, "case": case(70, 70, 4, 2, causal=True, grad=True, seed=44)}
    for name, l2 in (("route-kv-past-l2", 35_839), ("route-kv-fits-l2", 35_840))
}

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from tests.attention import test_flash_triton, test_flash_triton_launch_order as lo
mod = test_flash_triton.load_by_path()
cases = json.loads(sys.argv[1])
run = lambda c: (lo.launch_map if "pairs" in c else lo.routed if "l2" in c else lo.run_grouped)
print("RESULTS " + json.dumps([run(c)(mod, c) for c in cases]))
"""


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    maps = {
        name: {"pairs": p, "tiles": t, "group": g, "heavy_first": h}
        for name, (p, t, g, h) in MAPS.items()
    }
    return run_interpreted({**maps, **GROUPED, **ROUTED}, CHILD)


@pytest.mark.parametrize("name", list(MAPS))
def test_each_program_takes_the_pair_and_tile_of_the_order_asked(
    name: str, results: dict[str, dict[str, Any]]
) -> None:
    assert results[name]["order"] == expected_order(*MAPS[name])


@pytest.mark.parametrize("name", list(GROUPED))
def test_kernels_in_a_grouped_order_match_float64(
    name: str, results: dict[str, dict[str, Any]]
) -> None:
    check(name, GROUPED[name], results[name])


def test_the_grouped_cases_reach_the_kernels_they_name(results: dict[str, dict[str, Any]]) -> None:
    tma = results["tma-mqa-q<kv-window-bf16-group5-grad"]
    assert tma["tma calls"] == 1 and tma["dkdv tma calls"] == tma["dq tma calls"] == 1
    plain = results["plain-gqa-causal-group3-grad"]
    assert plain["tma calls"] == plain["dkdv tma calls"] == plain["dq tma calls"] == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_a_launch_order_that_is_not_a_whole_number_is_refused(bad: Any) -> None:
    from tests.attention.test_flash_triton import load_by_path

    mod = load_by_path()
    with pytest.raises(ValueError, match=r"l2_group must be a whole number >= 0"):
        mod.flash_fwd.fixed_config(64, 64, 4, 2, True, True, l2_group=bad)
    tile = mod.TileConfig(16, 32, 4, 1, l2_group=bad)
    with pytest.raises(ValueError, match=r"dkdv l2_group must be a whole number >= 0"):
        mod.flash_bwd_config.check_backward_config(mod.BackwardConfig(tile, tile))


def test_the_default_route_launches_in_groups_where_k_and_v_pass_l2(
    results: dict[str, dict[str, Any]],
) -> None:
    """flash_attn_func, forward and backward, each kernel once: in the measured groups where
    K and V are more than L2 holds, in the grid's own order where they fit."""
    past, fits = results["route-kv-past-l2"], results["route-kv-fits-l2"]
    assert past["groups"] == {"forward": [16], "dkdv": [8], "dq": [8]}
    assert fits["groups"] == {"forward": [0], "dkdv": [0], "dq": [0]}
    for name in ROUTED:
        check(name, ROUTED[name]["case"], results[name])


def test_the_group_follows_the_bytes_of_k_and_v() -> None:
    import torch

    from tests.attention.test_flash_triton import load_by_path

    common = load_by_path().flash_common
    long_k = torch.empty(4, 4096, 16, 128, dtype=torch.bfloat16, device="meta")  # 2 x 64 MiB
    short_k = torch.empty(8, 1024, 16, 64, dtype=torch.bfloat16, device="meta")  # 2 x 16 MiB
    assert common.l2_bytes(torch.device("meta")) == common.L2_BYTES_UNKNOWN == 50 * 2**20
    assert common.launch_group(long_k, 16) == 16
    assert common.launch_group(long_k, 0) == 0
    assert common.launch_group(short_k, 16) == 0
