"""Tests for the Triton FlashAttention backward (attention/flash_triton, flash_bwd.py).

CPU: as in test_flash_triton.py, the kernels run under Triton's interpreter in a child process
(TRITON_INTERPRET=1 must be set before triton is imported) that prints every case's errors as
JSON. GPU tests (`-m gpu`) run the compiled kernels at training shapes. Reference: float64
autograd through test_flash_triton.reference; error = ||grad - ref|| / ||ref||.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tests.attention import test_flash_triton as fwd_tests
from tests.attention.test_flash_triton import HAS_TRITON, make_qkv, reference, rel_err

# Measured in the interpreter: ~3e-4 (fp16) and ~7e-3 (bf16); a wrong gradient reads ~1.
GRAD_TOL = {"float16": 3e-3, "bfloat16": 2e-2}


def reference_grads(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dout: torch.Tensor,
    causal: bool,
    scale: float | None,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """float64 output and (dq, dk, dv) by autograd through the reference attention, one batch
    element at a time (the float64 score matrices of a training shape are GBs)."""
    outs: list[torch.Tensor] = []
    grads: list[list[torch.Tensor]] = [[], [], []]
    for i in range(q.shape[0]):
        leaves = [x[i : i + 1].detach().to(torch.float64).requires_grad_() for x in (q, k, v)]
        out = reference(*leaves, causal, scale)
        out.backward(dout[i : i + 1].to(torch.float64))
        outs.append(out.detach())
        for acc, x in zip(grads, leaves, strict=True):
            acc.append(x.grad)
    return torch.cat(outs), [torch.cat(g) for g in grads]


def grad_err(grad: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative error, or the absolute one where the true gradient is 0 (S = 1: dq = dk = 0)."""
    return rel_err(grad, ref) if ref.norm() > 0 else grad.double().norm().item()


def make_dout(out_shape: torch.Size, dtype: torch.dtype, device: str, layout: str) -> torch.Tensor:
    """The incoming gradient: contiguous, or a [B, H, S, D] tensor seen as [B, S, H, D]."""
    b, s, h, d = out_shape
    if layout == "bhsd":
        return torch.randn(b, h, s, d, dtype=dtype, device=device).transpose(1, 2)
    return torch.randn(b, s, h, d, dtype=dtype, device=device)


def attend(mod: types.ModuleType, q: Any, k: Any, v: Any, case: dict[str, Any]) -> torch.Tensor:
    """The public entry points as callers use them: keyword call, or a fixed launch."""
    if case["bwd"] is None:
        kw = {} if case["scale"] is None else {"softmax_scale": case["scale"]}
        return mod.flash_attn_func(q=q, k=k, v=v, causal=case["causal"], **kw)
    dkdv, dq = (mod.TileConfig(*tile) for tile in case["bwd"])
    return mod.flash_attn_func_with_config(
        q, k, v, softmax_scale=case["scale"], causal=case["causal"],
        block_m=64, block_n=64, num_warps=4, num_stages=2,
        backward_config=mod.BackwardConfig(dkdv, dq),
    )  # fmt: skip


def lse_error(
    mod: types.ModuleType, q: torch.Tensor, k: torch.Tensor, case: dict[str, Any]
) -> float:
    """Largest |lse - float64 logsumexp| of the forward's training output (natural log)."""
    qd, kd = (x.detach() for x in (q, k))
    fixed = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    _, lse = mod.flash_fwd._launch(qd, kd, kd, case["scale"], case["causal"], fixed, True)
    scale = case["scale"] or qd.shape[-1] ** -0.5
    scores = qd.double().transpose(1, 2) @ kd.double().permute(0, 2, 3, 1) * scale  # B,H,S,S
    if case["causal"]:
        seqlen = scores.shape[-1]
        hidden = torch.ones(seqlen, seqlen, dtype=torch.bool, device=qd.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return (lse.double() - scores.logsumexp(-1)).abs().max().item()


def launches_lse(mod: types.ModuleType, call: Any) -> tuple[torch.Tensor, list[bool]]:
    """call()'s result and, per forward launch it made, whether the launch wrote the LSE."""
    launch = mod.flash_autograd._launch
    asked: list[bool] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        asked.append(bool(kwargs.get("return_lse", False)))
        return launch(*args, **kwargs)

    mod.flash_autograd._launch = recording
    try:
        return call(), asked
    finally:
        mod.flash_autograd._launch = launch


def grad_errors(mod: types.ModuleType, case: dict[str, Any], device: str = "cpu") -> dict:
    """Run one case forward and backward; errors against float64 and what else the tests read."""
    torch.manual_seed(case["seed"])
    dtype = getattr(torch, case["dtype"])
    q, k, v = make_qkv(case["B"], case["S"], case["H"], case["D"], dtype, device, case["layout"])
    for name, x in zip("qkv", (q, k, v), strict=True):
        x.requires_grad_(name in case["wants"])
    out, asked_lse = launches_lse(mod, lambda: attend(mod, q, k, v, case))
    dout = make_dout(out.shape, dtype, device, case["dout_layout"])
    out.backward(dout)
    ref_out, ref_grads = reference_grads(q, k, v, dout, case["causal"], case["scale"])
    res: dict[str, Any] = {"out": rel_err(out.detach(), ref_out), "grad_fn": bool(out.grad_fn)}
    for name, x, ref in zip("qkv", (q, k, v), ref_grads, strict=True):
        g = x.grad
        res[f"d{name}"] = None if g is None else grad_err(g, ref)
        res[f"d{name} meta"] = g is None or (g.shape == x.shape and g.dtype == dtype)
        res[f"d{name} finite"] = g is None or bool(g.isfinite().all())
    with torch.no_grad():  # inputs still require grad: the inference path all the same
        plain, plain_asked_lse = launches_lse(mod, lambda: attend(mod, q, k, v, case))
    res["no-grad same output"] = torch.equal(plain, out.detach())
    res["no-grad untracked"] = plain.grad_fn is None
    res["lse only for training"] = asked_lse == [True] and plain_asked_lse == [False]
    res["lse"] = lse_error(mod, q, k, case)
    return res


# ---------------------------------------------------------------------------------------
# CPU: Triton interpreter in a child process; then configs, exports, kernel names
# ---------------------------------------------------------------------------------------

# Run in the child with TRITON_INTERPRET=1; argv[1] = JSON list of cases; prints JSON results.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from tests.attention import test_flash_triton, test_flash_triton_bwd as tb
mod = test_flash_triton.load_by_path()
print("RESULTS " + json.dumps([tb.grad_errors(mod, c) for c in json.loads(sys.argv[1])]))
"""


def case(
    B: int,
    S: int,
    H: int,
    D: int,
    dtype: str,
    causal: bool,
    *,
    bwd: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
    layout: str = "contiguous",
    dout_layout: str = "contiguous",
    scale: float | None = None,
    wants: str = "qkv",
    seed: int = 0,
) -> dict[str, Any]:
    """bwd: ((dkdv block_m, block_n, warps, stages), (dq ...)), or None for the default path
    (flash_attn_func(q=, k=, v=, causal=)); wants: the inputs that require grad."""
    return {
        "B": B, "S": S, "H": H, "D": D, "dtype": dtype, "causal": causal, "bwd": bwd,
        "layout": layout, "dout_layout": dout_layout, "scale": scale, "wants": wants,
        "seed": seed,
    }  # fmt: skip


SMALL_TILES = ((16, 32, 4, 1), (32, 16, 4, 1))  # many tiles even at S ~ 100
TALL_TILES = ((16, 64, 4, 1), (64, 16, 4, 1))  # block_n = 4 x block_m and the reverse

FAST_CASES = {
    "S100-causal-fp16-D64-H2": case(1, 100, 2, 64, "float16", True),
    "S100-full-bf16-D64": case(1, 100, 2, 64, "bfloat16", False, seed=1),
    "S77-causal-bf16-D32-bhsd-layouts": case(
        2, 77, 2, 32, "bfloat16", True, layout="bhsd", dout_layout="bhsd", seed=2
    ),
    "S70-full-fp16-D128-strided-scale0.3": case(
        1, 70, 1, 128, "float16", False, layout="strided", scale=0.3, seed=3
    ),
    "S129-causal-bf16-D16-small-tiles-B2": case(2, 129, 1, 16, "bfloat16", True, bwd=SMALL_TILES),
    "S1-causal-fp16": case(1, 1, 1, 64, "float16", True, seed=5),
    "S64-causal-fp16-only-q-needs-grad": case(1, 64, 1, 64, "float16", True, wants="q", seed=6),
    "S64-full-fp16-only-kv-need-grad": case(1, 64, 1, 64, "float16", False, wants="kv", seed=7),
    "S200-causal-fp16-tall-tiles": case(1, 200, 1, 64, "float16", True, bwd=TALL_TILES, seed=8),
    "S150-full-bf16-tall-tiles": case(1, 150, 1, 64, "bfloat16", False, bwd=TALL_TILES, seed=9),
}

SLOW_CASES = {
    "S40-causal-bf16-D256": case(1, 40, 1, 256, "bfloat16", True, seed=10),
    "S300-causal-fp16-D128-B2H2": case(2, 300, 2, 128, "float16", True, seed=11),
    "S257-full-bf16-D64-small-tiles": case(1, 257, 1, 64, "bfloat16", False, bwd=SMALL_TILES),
}


@pytest.fixture(scope="module")
def fast_results() -> dict[str, dict[str, Any]]:
    return fwd_tests.run_interpreted(FAST_CASES, CHILD)


@pytest.fixture(scope="module")
def slow_results() -> dict[str, dict[str, Any]]:
    return fwd_tests.run_interpreted(SLOW_CASES, CHILD)


def check_case(name: str, spec: dict[str, Any], res: dict[str, Any]) -> None:
    tol = GRAD_TOL[spec["dtype"]]
    assert res["grad_fn"], "a call on inputs that require grad must be recorded by autograd"
    assert res["out"] < fwd_tests.TOL, f"{name}: output error {res['out']:.2e}"
    for grad in ("dq", "dk", "dv"):
        wanted = grad[1] in spec["wants"]
        assert (res[grad] is not None) == wanted, f"{name}: {grad} present = {not wanted}"
        assert res[f"{grad} meta"] and res[f"{grad} finite"], f"{name}: {grad} shape/dtype/NaN"
        if wanted:
            assert res[grad] < tol, f"{name}: {grad} relative error {res[grad]:.2e}"
    assert res["no-grad same output"], f"{name}: no-grad output differs from the training one"
    assert res["no-grad untracked"], f"{name}: no-grad call recorded a backward"
    assert res["lse only for training"], f"{name}: LSE written by inference or not by training"
    assert res["lse"] < 1e-3, f"{name}: log-sum-exp off by {res['lse']:.2e}"


@pytest.mark.parametrize("name", list(FAST_CASES))
def test_interpreter_grads_match_float64(name: str, fast_results: dict[str, dict]) -> None:
    check_case(name, FAST_CASES[name], fast_results[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_CASES))
def test_interpreter_grads_match_float64_more(name: str, slow_results: dict[str, dict]) -> None:
    check_case(name, SLOW_CASES[name], slow_results[name])


@pytest.fixture(scope="module")
def mod() -> types.ModuleType:
    if not HAS_TRITON:
        pytest.skip("triton is not importable")
    return fwd_tests.load_by_path()


def test_rejects_misaligned_backward_tiles(mod: types.ModuleType) -> None:
    good = mod.TileConfig(32, 64, 4, 1)
    q = torch.randn(1, 8, 1, 64, dtype=torch.float16)
    for bad, match in (
        (mod.BackwardConfig(mod.TileConfig(64, 32, 4, 1), mod.TileConfig(64, 32, 4, 1)), "dkdv"),
        (mod.BackwardConfig(good, mod.TileConfig(32, 64, 4, 1)), "dq"),
        (mod.BackwardConfig(mod.TileConfig(8, 64, 4, 1), good), "powers of two"),
    ):
        with pytest.raises(ValueError, match=match):
            mod.flash_attn_backward(q, q, q, q, q, q, 0.125, True, config=bad)


def test_exports_and_kernel_names(mod: types.ModuleType) -> None:
    """The names a profiler trace shows, and the package surface the app loads."""
    for name in ("flash_attn_func", "flash_attn_func_with_config", "SUPPORTED_HEAD_DIMS"):
        assert name in mod.__all__
    kernels = [mod.flash_bwd._flash_bwd_preprocess, mod.flash_bwd._flash_bwd_dkdv]
    names = [k.fn.__name__ for k in [*kernels, mod.flash_bwd._flash_bwd_dq]]
    assert names == ["_flash_bwd_preprocess", "_flash_bwd_dkdv", "_flash_bwd_dq"]
    for head_dim in mod.SUPPORTED_HEAD_DIMS:  # every default launch is a valid one
        mod.flash_bwd_config.check_backward_config(mod.default_backward_config(head_dim))


def test_inference_and_training_share_the_autotuner_key(
    mod: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triton's autotuner keys on every tensor argument's dtype: the same dtypes in inference
    and training launches mean one tuned config, hence bit-identical outputs on the GPU."""
    seen: list[tuple[list[str], bool]] = []

    class RecordingAutotuner:
        def __getitem__(self, grid: Any) -> Any:
            def launch(*args: Any, **kwargs: Any) -> None:
                dtypes = [str(a.dtype) for a in args if isinstance(a, torch.Tensor)]
                seen.append((dtypes, kwargs["STORE_LSE"]))

            return launch

    monkeypatch.setattr(mod.flash_fwd, "_flash_fwd_autotuned", RecordingAutotuner())
    monkeypatch.setattr(mod.flash_fwd, "INTERPRET", False)  # take the autotuned path
    monkeypatch.setattr(mod.flash_common, "INTERPRET", True)  # accept CPU tensors
    q = torch.randn(1, 8, 1, 64, dtype=torch.bfloat16)
    mod.flash_fwd._launch(q, q, q, None, True, None)
    mod.flash_fwd._launch(q, q, q, None, True, None, return_lse=True)
    (inference, store_a), (training, store_b) = seen
    assert inference == training and (store_a, store_b) == (False, True)


# ---------------------------------------------------------------------------------------
# GPU: the compiled kernels at training shapes
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_mod() -> types.ModuleType:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return fwd_tests.load_by_path()


def sdpa_grads(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, causal: bool
) -> list[torch.Tensor]:
    """SDPA's (dq, dk, dv) for the same inputs, [B, S, H, D] as ours."""
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in leaves), is_causal=causal)
    out.transpose(1, 2).backward(dout)
    return [x.grad for x in leaves]


GPU_SHAPES = [(8, 1024, 16, 64), (4, 4096, 16, 128)]
GPU_MATRIX = [
    pytest.param(shape, dt, causal, id=f"B{shape[0]}-S{shape[1]}-D{shape[3]}-{dt}-"
                 + ("causal" if causal else "full"))
    for shape in GPU_SHAPES
    for dt in ("bfloat16", "float16")
    for causal in (True, False)
]  # fmt: skip
GPU_GRAD_TOL = {"float16": 5e-3, "bfloat16": 3e-2}


@pytest.mark.gpu
@pytest.mark.parametrize("shape, dtype, causal", GPU_MATRIX)
def test_gpu_grads_match_float64_and_sdpa(
    gpu_mod: types.ModuleType, shape: tuple[int, ...], dtype: str, causal: bool
) -> None:
    b, s, h, d = shape
    torch.manual_seed(s + d)
    q, k, v = make_qkv(b, s, h, d, getattr(torch, dtype), device="cuda")
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out = gpu_mod.flash_attn_func_with_config(*leaves, causal=causal, num_stages=3)
    dout = torch.randn_like(out)
    out.backward(dout)
    ours = [x.grad for x in leaves]
    _, ref = reference_grads(q, k, v, dout, causal, None)
    theirs = sdpa_grads(q, k, v, dout, causal)
    for name, g, r, t in zip(("dq", "dk", "dv"), ours, ref, theirs, strict=True):
        assert g.shape == q.shape and g.dtype == q.dtype and bool(g.isfinite().all())
        err, sdpa_err = rel_err(g, r), rel_err(t, r)
        assert err < GPU_GRAD_TOL[dtype], f"{name}: {err:.2e} vs float64"
        # About as close to float64 as SDPA's own backward (same bf16/fp16 roundings of P, dS).
        assert err < 3 * sdpa_err + 1e-4, f"{name}: ours {err:.2e}, SDPA {sdpa_err:.2e}"
        assert rel_err(g, t.double()) < GPU_GRAD_TOL[dtype], f"{name}: far from SDPA's"


@pytest.mark.gpu
def test_gpu_autotuned_keyword_call_backward(gpu_mod: types.ModuleType) -> None:
    """The app's runner: flash_attn_func(q=, k=, v=, causal=) on leaves, then out.backward."""
    torch.manual_seed(1)
    q, k, v = make_qkv(2, 1000, 8, 128, torch.bfloat16, device="cuda", layout="bhsd")
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    out = gpu_mod.flash_attn_func(q=leaves[0], k=leaves[1], v=leaves[2], causal=True)
    dout = torch.randn_like(out)
    out.backward(dout)
    _, ref = reference_grads(q, k, v, dout, True, None)
    for x, r in zip(leaves, ref, strict=True):
        assert rel_err(x.grad, r) < GPU_GRAD_TOL["bfloat16"]
    with torch.no_grad():
        plain = gpu_mod.flash_attn_func(q=leaves[0], k=leaves[1], v=leaves[2], causal=True)
    assert torch.equal(plain, out.detach()) and plain.grad_fn is None


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, causal", [(16, True), (32, False), (256, True)])
def test_gpu_other_head_dims_backward(
    gpu_mod: types.ModuleType, head_dim: int, causal: bool
) -> None:
    """Each head dim's default backward launch, through the fixed-config forward."""
    default = gpu_mod.default_backward_config(head_dim)
    tiles = tuple(
        (t.block_m, t.block_n, t.num_warps, t.num_stages) for t in (default.dkdv, default.dq)
    )
    spec = case(2, 333, 4, head_dim, "bfloat16", causal, bwd=tiles, seed=head_dim)
    check_case(f"D{head_dim}", spec, grad_errors(gpu_mod, spec, device="cuda"))
