"""Tests for the warp-specialised Gluon forward (build/torch-universal/flash_gluon_ws.py).

CPU: the module imports and says it cannot run; its input checks refuse what it cannot
run; with a Triton whose Gluon has warp_specialize and the Hopper pieces, the kernel
compiles for sm_90 without spill or ptxas serialising its wgmmas, with the register split
it asks for (240 per consumer thread, 24 for the producer's warpgroup) and the softmax's
exp2 issued while its own P·V wgmma is in flight. GPU (`-m gpu`, Hopper only): float64
checks at the seven ragged cases of test_flash_gluon.py.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys
import types

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks import flash_gluon_compile  # noqa: E402


@pytest.fixture(scope="module")
def ws_mod() -> types.ModuleType:
    return flash_gluon_compile.load_ws_module()


def test_imports_and_is_unavailable_without_a_hopper_gpu(ws_mod: types.ModuleType) -> None:
    if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("a Hopper GPU is present")
    assert ws_mod.available() is False


@pytest.mark.parametrize(
    ("q_shape", "kv_shape", "dtype", "why"),
    [
        ((1, 64, 4, 128), (1, 64, 4, 128), torch.float32, "fp16 or bf16"),
        ((1, 64, 4, 96), (1, 64, 4, 96), torch.bfloat16, "head_dim 64 or 128"),
        ((1, 64, 3, 128), (1, 64, 2, 128), torch.bfloat16, "multiple of kv heads"),
    ],
)
def test_refuses_what_it_cannot_run(
    ws_mod: types.ModuleType, q_shape: tuple, kv_shape: tuple, dtype: torch.dtype, why: str
) -> None:
    q = torch.zeros(q_shape, dtype=dtype)
    k = torch.zeros(kv_shape, dtype=dtype)
    with pytest.raises(ValueError, match=why):
        ws_mod.gluon_ws_forward(q, k, k.clone(), causal=True)


def test_refuses_a_v_of_another_dtype(ws_mod: types.ModuleType) -> None:
    q = torch.zeros(1, 64, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="of one dtype"):
        ws_mod.gluon_ws_forward(q, q, q.to(torch.float16))


@pytest.mark.parametrize(
    "tile", [{"block_m": 64}, {"block_m": 256}, {"block_n": 256}, {"stages": 1}]
)
def test_refuses_a_bad_tile(ws_mod: types.ModuleType, tile: dict) -> None:
    q = torch.zeros(1, 64, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="block_m 128, block_n 64 or 128, stages >= 2"):
        ws_mod.gluon_ws_forward(q, q, q, **tile)


def test_refuses_rings_past_shared_memory(ws_mod: types.ModuleType) -> None:
    q = torch.zeros(1, 64, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="shared memory"):
        ws_mod.gluon_ws_forward(q, q, q, block_n=128, stages=4)


@pytest.mark.slow
def test_compiles_for_sm90_warp_specialised_without_spill_or_serialisation(
    ws_mod: types.ModuleType,
) -> None:
    import triton

    if ws_mod._MISSING:
        pytest.skip(f"this Triton's Gluon lacks: {ws_mod._MISSING}")
    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (bin_dir / "ptxas").exists():
        pytest.skip("no ptxas bundled with this Triton")
    kernel = flash_gluon_compile.compile_ws(ws_mod, (128, 128, 4, 2, 128, True, True))
    ptx = kernel.asm["ptx"]
    usage, serialised = flash_gluon_compile.ptxas_report(ptx, bin_dir)
    assert not serialised, usage  # else every wgmma waits at once, whatever the PTX says
    assert "0 B spill" in usage
    caps = {int(n) for n in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)}
    assert {ws_mod.CONSUMER_REGS, ws_mod.PRODUCER_REGS} <= caps, caps
    groups = flash_gluon_compile.overlap(ptx)
    # per consumer, the unmasked and the masked loop: P(t-1)·V(t-1) runs under tile t's exp2
    in_flight = [g for g in groups if g[0] == "P·V" and g[1] >= 64]
    assert len(in_flight) == 4, groups


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(7))
def test_gpu_matches_float64(ws_mod: types.ModuleType, case: int) -> None:
    if not ws_mod.available():
        pytest.skip("needs a Hopper GPU and Triton 3.6's Gluon")
    bench = importlib.import_module("benchmarks.bench_flash_gluon")
    err, lse_err = bench.check(ws_mod.gluon_ws_forward, bench.CASES[case])
    assert err <= bench.TOL and lse_err <= bench.TOL, (err, lse_err)
