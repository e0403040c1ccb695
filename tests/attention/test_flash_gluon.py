"""Tests for the Gluon forward (attention/flash_triton/build/torch-universal/flash_gluon.py).

CPU: the module imports and says it cannot run; its input checks refuse what TMA cannot
address; with a Triton whose Gluon has the Hopper pieces, the kernel compiles for sm_90
without ptxas serialising its wgmmas, and the next tile's Q·Kᵀ stays in flight across the
softmax's exp2 (the point of the kernel). GPU (`-m gpu`, Hopper only): float64 checks.
"""

from __future__ import annotations

import importlib
import pathlib
import sys
import types

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks import flash_gluon_compile  # noqa: E402


@pytest.fixture(scope="module")
def gluon_mod() -> types.ModuleType:
    return flash_gluon_compile.load_module()


def test_imports_and_is_unavailable_without_a_hopper_gpu(gluon_mod: types.ModuleType) -> None:
    if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("a Hopper GPU is present")
    assert gluon_mod.available() is False


@pytest.mark.parametrize(
    ("q_shape", "kv_shape", "dtype", "why"),
    [
        ((1, 64, 4, 128), (1, 64, 4, 128), torch.float32, "fp16 or bf16"),
        ((1, 64, 4, 96), (1, 64, 4, 96), torch.bfloat16, "head_dim 64 or 128"),
        ((1, 64, 3, 128), (1, 64, 2, 128), torch.bfloat16, "multiple of kv heads"),
    ],
)
def test_refuses_what_it_cannot_run(
    gluon_mod: types.ModuleType, q_shape: tuple, kv_shape: tuple, dtype: torch.dtype, why: str
) -> None:
    q = torch.zeros(q_shape, dtype=dtype)
    k = torch.zeros(kv_shape, dtype=dtype)
    with pytest.raises(ValueError, match=why):
        gluon_mod.gluon_forward(q, k, k.clone(), causal=True)


def test_refuses_a_v_of_another_dtype(gluon_mod: types.ModuleType) -> None:
    """k like q, v not: a chained `!=` let this through to the kernel."""
    q = torch.zeros(1, 64, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="of one dtype"):
        gluon_mod.gluon_forward(q, q, q.to(torch.float16))


def test_refuses_a_bad_tile(gluon_mod: types.ModuleType) -> None:
    q = torch.zeros(1, 64, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="block_m"):
        gluon_mod.gluon_forward(q, q, q, block_m=64, num_warps=8)


@pytest.mark.slow
def test_compiles_for_sm90_with_the_qk_wgmma_in_flight_across_exp2(
    gluon_mod: types.ModuleType,
) -> None:
    import triton

    if gluon_mod._MISSING:
        pytest.skip(f"this Triton's Gluon lacks: {gluon_mod._MISSING}")
    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (bin_dir / "ptxas").exists():
        pytest.skip("no ptxas bundled with this Triton")
    config = (128, 128, 8, 2, 128, True, True)
    kernel = flash_gluon_compile.compile_kernel(gluon_mod._flash_fwd_gluon_kernel, config)
    usage, serialised = flash_gluon_compile.ptxas_report(kernel.asm["ptx"], bin_dir)
    assert not serialised, usage  # else every wgmma waits at once, whatever the PTX says
    assert "0 B spill" in usage
    groups = flash_gluon_compile.overlap(kernel.asm["ptx"])
    in_flight = [g for g in groups if g[0] == "Q·Kᵀ" and g[1] >= 64 and g[2] == 1]
    assert len(in_flight) == 2, groups  # the unmasked and the masked loop


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(7))
def test_gpu_matches_float64(gluon_mod: types.ModuleType, case: int) -> None:
    if not gluon_mod.available():
        pytest.skip("needs a Hopper GPU and Triton 3.6's Gluon")
    bench = importlib.import_module("benchmarks.bench_flash_gluon")
    err, lse_err = bench.check(gluon_mod.gluon_forward, bench.CASES[case])
    assert err <= bench.TOL and lse_err <= bench.TOL, (err, lse_err)
