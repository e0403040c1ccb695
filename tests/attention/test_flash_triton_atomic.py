"""Issue 44's atomic dQ (`BackwardConfig(atomic_dq=True)`, flash_bwd.py): the dK/dV pass also
adds each tile pair's dS K into an fp32 dQ by atomics, and no dQ pass runs. Checked as the
other kernels are (test_flash_triton_shapes.py): Triton's interpreter against float64, on
GQA summed over a group, q_len < kv_len with a window, rows that see no key, ragged keys."""

from __future__ import annotations

from typing import Any

import pytest

from tests.attention.test_flash_triton import run_interpreted
from tests.attention.test_flash_triton_shapes import CHILD, case, check

TILES = {"bwd_atomic": [[16, 32], [32, 16]]}  # (dK/dV, dQ) tiles: the dQ tile goes unused
CASES = {
    "atomic-gqa-causal-grad": case(
        70, 70, 4, 2, causal=True, path="fixed", tiles=16, grad=True, config=TILES
    ),
    "atomic-mqa-q<kv-causal-window-bf16-grad": case(
        40,
        100,
        4,
        1,
        "bfloat16",
        causal=True,
        window=(20, -1),
        path="fixed",
        tiles=16,
        grad=True,
        seed=3,
        config=TILES,
    ),
    "atomic-no-key-rows-grad": case(
        60,
        20,
        2,
        2,
        window=(3, 0),
        path="fixed",
        tiles=16,
        grad=True,
        seed=9,
        config={"bwd_atomic": [[16, 16], [16, 16]]},
    ),
    "atomic-full-ragged-kv-bf16-grad": case(  # 30 keys in one 32-key tile, 90 query rows
        90, 30, 2, 2, "bfloat16", path="fixed", tiles=16, grad=True, seed=5, config=TILES
    ),
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    return run_interpreted(CASES, CHILD)


@pytest.mark.parametrize("name", list(CASES))
def test_atomic_dq_matches_float64(name: str, results: dict[str, dict[str, Any]]) -> None:
    check(name, CASES[name], results[name])
    assert results[name]["atomic dq calls"] == 1, "the atomic path did not run"
    assert results[name]["dkdv tma calls"] == results[name]["dq tma calls"] == 0


def test_the_cases_reach_rows_that_see_no_key(results: dict[str, dict[str, Any]]) -> None:
    assert results["atomic-no-key-rows-grad"]["empty rows"] == 40
