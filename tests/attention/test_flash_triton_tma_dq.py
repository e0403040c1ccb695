"""Issue 44, step 14's candidate: dQ added in the dK/dV pass by TMA bulk reductions
(`BackwardConfig(atomic_dq=True, tma_dq=True)`), FlashAttention-3's way, not by scalar atomics.

Triton's interpreter has no TMA reductions, so on the CPU the launch takes the scalar atomics
and says so (`DQ_TMA` False): checked here with the config's rules and its short form. The
reductions themselves run on a GPU (`-m gpu`): the compiled kernel against float64 and
against the two-pass backward at ragged, GQA and windowed shapes, with `DQ_TMA` seen on.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.attention.test_flash_triton import launched, load_by_path, rel_err, run_interpreted

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from tests.attention import test_flash_triton, test_flash_triton_tma_dq as tt
mod = test_flash_triton.load_by_path()
cases = json.loads(sys.argv[1])
print("RESULTS " + json.dumps([tt.reduced_against_float64(mod, c) for c in cases]))
"""
# (q_len, kv_len, heads, kv_heads, causal, window): ragged tiles, GQA, bottom-right causal
CPU_CASES = {"ragged-causal-gqa2": (45, 83, 4, 2, True, (-1, -1))}
GPU_CASES = {
    "ragged-causal": (1000, 1000, 4, 4, True, (-1, -1)),
    "gqa4-q-shorter-causal": (777, 1200, 8, 2, True, (-1, -1)),
    "window-ragged": (1500, 1500, 4, 2, False, (200, 30)),
}


def gradients(mod: Any, qkv: tuple, dout: torch.Tensor, spec: tuple, config: Any) -> list:
    *_, causal, window = spec
    leaves = [x.detach().clone().requires_grad_() for x in qkv]
    small = {"block_m": 32, "block_n": 32, "num_warps": 4, "num_stages": 1}  # the interpreter's
    out = mod.flash_attn_func_with_config(
        *leaves, causal=causal, window_size=window, backward_config=config,
        **(small if dout.device.type == "cpu" else {}),
    )  # fmt: skip
    out.backward(dout)
    return [x.grad for x in leaves]


def inputs(spec: tuple, d: int, device: str) -> tuple[tuple, torch.Tensor]:
    sq, sk, heads, kv_heads, *_ = spec
    torch.manual_seed(sq + sk)
    q = torch.randn(2, sq, heads, d, dtype=torch.bfloat16, device=device)
    k, v = (torch.randn(2, sk, kv_heads, d, dtype=torch.bfloat16, device=device) for _ in "kv")
    return (q, k, v), torch.randn_like(q)


def reduced_against_float64(mod: Any, spec: list, device: str = "cpu", d: int = 32) -> dict:
    """tma_dq's gradients: their error against float64, their largest difference from the
    scalar atomics' and the two passes', and each dK/dV launch's DQ_TMA."""
    from tests.attention.test_flash_triton_shapes import reference_attention

    spec = (*spec[:5], tuple(spec[5]))
    qkv, dout = inputs(spec, d, device)
    default = mod.default_backward_config(d)
    tiles = (default.dkdv, default.dq)
    if device == "cpu":  # few, small programs: the interpreter's cost is per operation
        tiles = (mod.TileConfig(16, 32, 4, 1), mod.TileConfig(32, 16, 4, 1))
    with launched(mod.flash_bwd, "_flash_bwd_dkdv") as launches:
        reduced = gradients(mod, qkv, dout, spec, mod.BackwardConfig(*tiles, True, True))
    atomic = gradients(mod, qkv, dout, spec, mod.BackwardConfig(*tiles, True))
    two_passes = gradients(mod, qkv, dout, spec, mod.BackwardConfig(*tiles))
    leaves = [x.detach().double().requires_grad_() for x in qkv]
    reference_attention(*leaves, spec[4], spec[5]).backward(dout.double())

    def largest(a: list, b: list) -> float:
        return max((x.float() - y.float()).abs().max().item() for x, y in zip(a, b, strict=True))

    return {
        "error": max(rel_err(g, x.grad) for g, x in zip(reduced, leaves, strict=True)),
        "from atomics": largest(reduced, atomic),
        "from two passes": largest(reduced, two_passes),
        "finite": all(bool(g.isfinite().all()) for g in reduced),
        "dq_tma": [kwargs["DQ_TMA"] for _, kwargs in launches],
    }


@pytest.fixture(scope="module")
def interpreted() -> dict[str, dict[str, Any]]:
    return run_interpreted({n: [*s[:5], list(s[5])] for n, s in CPU_CASES.items()}, CHILD)


def test_the_interpreter_takes_the_scalar_atomics_and_gets_their_gradients(interpreted) -> None:
    res = interpreted["ragged-causal-gqa2"]
    assert res["dq_tma"] == [False], "the interpreter has no TMA reductions: scalar atomics"
    assert res["from atomics"] == 0.0, "the same kernel path must give the same gradients"
    assert res["finite"] and res["error"] < 2e-2, res


def test_tma_dq_is_said_and_needs_atomic_dq() -> None:
    mod = load_by_path()
    tile = mod.TileConfig(64, 128, 8, 3)
    config = mod.BackwardConfig(tile, tile, atomic_dq=True, tma_dq=True)
    assert config.short() == "dkdv BM64 BN128 w8 s3, dQ by TMA reductions"
    assert mod.BackwardConfig(tile, tile, True).short().endswith("dQ by atomics")
    with pytest.raises(ValueError, match="tma_dq adds dQ in the dK/dV pass: it needs atomic_dq"):
        mod.flash_bwd_config.check_backward_config(mod.BackwardConfig(tile, tile, tma_dq=True))
    assert mod.default_backward_config(128, 8).tma_dq is False  # not on the route untimed


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_gpu_tma_reduced_dq_matches_float64_and_the_two_passes(name: str) -> None:
    """The compiled kernel at the default dK/dV tile (D 128): the reductions ran (DQ_TMA on
    every launch) and their gradients are float64's to bf16 rounding, and the two passes'
    to fp32 summation order."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run `pytest -m gpu` on the H100/H200")
    res = reduced_against_float64(load_by_path(), list(GPU_CASES[name]), "cuda", 128)
    assert res["dq_tma"] == [True], res
    assert res["finite"] and res["error"] < 2e-2, res
    assert res["from two passes"] < 0.05, res
