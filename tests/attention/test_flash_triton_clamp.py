"""Issue 44, step 13's candidate: the pointer dK/dV kernel with `TileConfig(clamp_rows=True)`
reads a masked tile's rows past the end as the last row instead of by masked loads (fewer
registers). Those rows' P is 0, so the gradients must equal the masked loads' exactly,
bit for bit: GQA, windows, ragged and unequal lengths, bottom-right causal, dQ by atomics.

CPU: Triton's interpreter in a child process (as test_flash_triton.py), which prints each
case's largest difference between the two and the clamped run's error against float64
(reference_attention of test_flash_triton_shapes). GPU (`-m gpu`): the compiled kernels, where
the register saving is real, at a ragged training shape.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from tests.attention.test_flash_triton import launched, run_interpreted

# Run in the child with TRITON_INTERPRET=1; argv[1] = JSON list of cases; prints JSON results.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from tests.attention import test_flash_triton, test_flash_triton_clamp as tc
mod = test_flash_triton.load_by_path()
print("RESULTS " + json.dumps([tc.clamped_against_masked(mod, c) for c in json.loads(sys.argv[1])]))
"""


def case(
    sq: int, sk: int, heads: int, kv_heads: int, causal: bool, *,
    window: tuple[int, int] = (-1, -1), atomic: bool = False, dtype: str = "bfloat16",
    dkdv: tuple[int, int] = (16, 32), seed: int = 0,
) -> dict[str, Any]:  # fmt: skip
    return {
        "sq": sq, "sk": sk, "heads": heads, "kv_heads": kv_heads, "causal": causal,
        "window": list(window), "atomic": atomic, "dtype": dtype, "dkdv": list(dkdv),
        "seed": seed,
    }  # fmt: skip


CASES = {
    "ragged-causal": case(77, 77, 2, 2, True),
    "ragged-full-fp16": case(70, 70, 1, 1, False, dtype="float16", seed=1),
    "q-shorter-causal-gqa2": case(45, 83, 4, 2, True, seed=2),
    "window-gqa4": case(90, 90, 4, 1, False, window=(20, 5), seed=3),
    "causal-window-ragged": case(99, 99, 2, 2, True, window=(30, 0), seed=4),
    "atomic-dq-ragged": case(61, 61, 2, 1, True, atomic=True, seed=5),
    "tall-tile-ragged": case(100, 100, 1, 1, True, dkdv=(16, 64), seed=6),
}


def clamped_against_masked(mod: Any, spec: dict[str, Any], device: str = "cpu") -> dict:
    """The same forward's gradients with the dK/dV kernel's masked and clamped loads: the
    largest difference between them, and the clamped ones' error against float64."""
    from tests.attention.test_flash_triton import rel_err
    from tests.attention.test_flash_triton_shapes import reference_attention

    torch.manual_seed(spec["seed"])
    dtype = getattr(torch, spec["dtype"])
    d = 32
    q = torch.randn(1, spec["sq"], spec["heads"], d, dtype=dtype, device=device)
    k, v = (torch.randn(1, spec["sk"], spec["kv_heads"], d, dtype=dtype, device=device)
            for _ in range(2))  # fmt: skip
    dout = torch.randn_like(q)
    window = tuple(spec["window"])
    grads = {}
    with launched(mod.flash_bwd, "_flash_bwd_dkdv") as launches:
        for clamp in (False, True):
            dkdv = mod.TileConfig(*spec["dkdv"], 4, 1, clamp_rows=clamp)
            config = mod.BackwardConfig(dkdv, mod.TileConfig(32, 16, 4, 1), spec["atomic"])
            leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
            out = mod.flash_attn_func_with_config(
                *leaves, causal=spec["causal"], window_size=window, block_m=32, block_n=32,
                num_warps=4, num_stages=1, backward_config=config,
            )  # fmt: skip
            out.backward(dout)
            grads[clamp] = [x.grad for x in leaves]
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    reference_attention(*leaves, spec["causal"], window).backward(dout.double())
    return {
        "difference": max(
            (a.float() - b.float()).abs().max().item()
            for a, b in zip(grads[False], grads[True], strict=True)
        ),
        "error": max(rel_err(g, x.grad) for g, x in zip(grads[True], leaves, strict=True)),
        "finite": all(bool(g.isfinite().all()) for g in grads[True]),
        "launched": [kwargs["CLAMP_ROWS"] for _, kwargs in launches],
    }


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    return run_interpreted(CASES, CHILD)


@pytest.mark.parametrize("name", list(CASES))
def test_clamped_rows_give_the_masked_loads_gradients_exactly(name: str, results) -> None:
    res = results[name]
    assert res["launched"] == [False, True], f"{name}: dK/dV launches {res['launched']}"
    assert res["finite"], f"{name}: a clamped gradient is not finite"
    assert res["difference"] == 0.0, f"{name}: clamped and masked differ by {res['difference']}"
    tol = 3e-3 if CASES[name]["dtype"] == "float16" else 2e-2
    assert res["error"] < tol, f"{name}: clamped gradients off float64 by {res['error']:.2e}"


def test_the_clamp_is_named_in_the_tiles_short_form_and_off_by_default() -> None:
    from tests.attention.test_flash_triton import load_by_path

    mod = load_by_path()
    assert mod.TileConfig(64, 128, 8, 3).clamp_rows is False
    assert mod.TileConfig(64, 128, 8, 3, clamp_rows=True).short() == "BM64 BN128 w8 s3 clamp"
    assert mod.default_backward_config(128, 8).dkdv.clamp_rows is False  # not on the route yet


@pytest.mark.gpu
def test_gpu_clamped_rows_give_the_masked_loads_gradients() -> None:
    """The compiled kernels at a ragged training shape (S 4000: a partial last tile), the
    default dK/dV tile with and without the clamp: the same gradients, bit for bit."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run `pytest -m gpu` on the H200")
    from tests.attention.test_flash_triton import load_by_path

    mod = load_by_path()
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4000, 8, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    dout = torch.randn_like(q)
    default = mod.default_backward_config(128)
    grads = []
    for clamp in (False, True):
        config = mod.BackwardConfig(dataclasses.replace(default.dkdv, clamp_rows=clamp), default.dq)
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        out = mod.flash_attn_func_with_config(*leaves, causal=True, backward_config=config)
        out.backward(dout)
        grads.append([x.grad for x in leaves])
    for masked, clamped in zip(*grads, strict=True):
        assert torch.equal(masked, clamped)
