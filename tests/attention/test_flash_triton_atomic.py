"""Issue 44's atomic dQ (`BackwardConfig(atomic_dq=True)`, flash_bwd.py): the dK/dV pass also
adds each tile pair's dS K into an fp32 dQ by atomics, and no dQ pass runs. Checked as the
other kernels are (test_flash_triton_shapes.py): Triton's interpreter against float64, on
GQA summed over a group, q_len < kv_len with a window, rows that see no key, ragged keys."""

from __future__ import annotations

from typing import Any

import pytest

from tests.attention.test_flash_triton import run_interpreted
from tests.attention.test_flash_triton_shapes import CASES as SHAPES
from tests.attention.test_flash_triton_shapes import CHILD, check

TMA = "bwd_tma"
# the TMA backward's four cases (test_flash_triton_shapes.py), each asking for atomics instead
CASES = {
    name.replace("bwd-tma-", "atomic-"): {**spec, "config": {"bwd_atomic": spec["config"][TMA]}}
    for name, spec in SHAPES.items()
    if name.startswith("bwd-tma-")
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
    assert len(CASES) == 4 and results["atomic-no-key-rows-grad"]["empty rows"] == 40
