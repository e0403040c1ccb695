"""Tests for the Triton FlashAttention forward in attention/flash_triton.

CPU: the kernel runs under Triton's interpreter (TRITON_INTERPRET=1 must be set before triton
is imported, and this process may already have imported it), so those checks run in a child
process that computes every case of a batch and prints the errors as JSON. GPU tests
(`-m gpu`) run the compiled kernel at realistic shapes. Reference: float64 attention on the
upcast inputs with an explicit causal mask; error = ||out - ref|| / ||ref||.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
KERNEL_DIR = REPO / "attention" / "flash_triton"
BUILD_DIR = KERNEL_DIR / "build" / "torch-universal"
TOL = 1e-2  # fp16/bf16 inputs; measured errors are ~3e-4 (fp16) and ~5e-3 (bf16)

HAS_TRITON = importlib.util.find_spec("triton") is not None
HAS_KERNELS = importlib.util.find_spec("kernels") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not importable")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def load_by_path(name: str = "_flash_attn_triton_test") -> types.ModuleType:
    """Import build/torch-universal as a package by path (its modules import relatively)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, BUILD_DIR / "__init__.py", submodule_search_locations=[str(BUILD_DIR)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    scale: float | None = None,
) -> torch.Tensor:
    """float64 attention, [B, S, H, D] in and out."""
    qd, kd, vd = (t.to(torch.float64).transpose(1, 2) for t in (q, k, v))  # (B, H, S, D)
    seqlen, head_dim = qd.shape[-2], qd.shape[-1]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    scores = qd @ kd.transpose(-1, -2) * scale  # (B, H, S, S)
    if causal:
        visible = torch.ones(seqlen, seqlen, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~visible, float("-inf"))
    return (scores.softmax(dim=-1) @ vd).transpose(1, 2)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.to(torch.float64) - ref).norm() / ref.norm()).item()


def make_qkv(
    batch: int,
    seqlen: int,
    heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: str = "cpu",
    layout: str = "contiguous",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fresh random q, k, v of shape [B, S, H, D] in one of three memory layouts."""

    def one() -> torch.Tensor:
        if layout == "contiguous":
            return torch.randn(batch, seqlen, heads, head_dim, dtype=dtype, device=device)
        if layout == "bhsd":  # a [B, H, S, D] tensor seen as [B, S, H, D]
            x = torch.randn(batch, heads, seqlen, head_dim, dtype=dtype, device=device)
            return x.transpose(1, 2)
        if layout == "strided":  # every other head and every other feature: stride_d = 2
            x = torch.randn(batch, seqlen, 2 * heads, 2 * head_dim, dtype=dtype, device=device)
            return x[:, :, ::2, ::2]
        raise ValueError(layout)

    return one(), one(), one()


# ---------------------------------------------------------------------------------------
# CPU: Triton interpreter in a child process
# ---------------------------------------------------------------------------------------

# Run in the child with TRITON_INTERPRET=1; argv[1] = JSON list of cases; prints JSON errors.
CHILD = r"""
import importlib.util, json, math, sys
import torch
sys.path.insert(0, sys.argv[2])
from tests.attention import test_flash_triton as t
mod = t.load_by_path()
results = []
for case in json.loads(sys.argv[1]):
    torch.manual_seed(case["seed"])
    dtype = getattr(torch, case["dtype"])
    q, k, v = t.make_qkv(case["B"], case["S"], case["H"], case["D"], dtype, layout=case["layout"])
    kw = dict(softmax_scale=case["scale"], causal=case["causal"])
    if case["config"]:
        out = mod.flash_attn_func_with_config(q, k, v, **kw, **case["config"])
    else:
        out = mod.flash_attn_func(q, k, v, **kw)
    ref = t.reference(q, k, v, case["causal"], case["scale"])
    ok_meta = out.shape == q.shape and out.dtype == q.dtype
    finite = bool(out.isfinite().all())
    results.append({"err": t.rel_err(out, ref), "meta": ok_meta, "finite": finite})
print("RESULTS " + json.dumps(results))
"""


def case(
    B: int,
    S: int,
    H: int,
    D: int,
    dtype: str,
    causal: bool,
    *,
    config: dict[str, Any] | None = None,
    layout: str = "contiguous",
    scale: float | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    return {
        "B": B, "S": S, "H": H, "D": D, "dtype": dtype, "causal": causal,
        "config": config, "layout": layout, "scale": scale, "seed": seed,
    }  # fmt: skip


BM128_BN64 = {"block_m": 128, "block_n": 64}
BM64_BN128 = {"block_m": 64, "block_n": 128}
BM32_BN16 = {"block_m": 32, "block_n": 16}
BM64_BN64 = {"block_m": 64, "block_n": 64}

FAST_CASES = {
    "S1-causal-fp16": case(1, 1, 1, 64, "float16", True),
    "S17-bf16": case(2, 17, 2, 64, "bfloat16", False, seed=1),
    "S17-causal-fp16": case(2, 17, 2, 64, "float16", True, seed=2),
    "S100-causal-bf16-D128": case(1, 100, 2, 128, "bfloat16", True, seed=3),
    "S129-fp16-D128": case(1, 129, 1, 128, "float16", False, seed=4),
    "S129-causal-bf16-BM128-BN64": case(1, 129, 1, 64, "bfloat16", True, config=BM128_BN64),
    "S200-causal-fp16-BM64-BN128": case(1, 200, 1, 64, "float16", True, config=BM64_BN128),
    "S100-causal-bhsd-layout": case(2, 100, 2, 64, "bfloat16", True, layout="bhsd", seed=5),
    "S77-strided-layout": case(1, 77, 2, 64, "float16", False, layout="strided", seed=6),
    "S70-causal-scale0.3": case(1, 70, 1, 64, "float16", True, scale=0.3, seed=7),
    "S100-fp16-BM64-BN64-B3": case(3, 100, 1, 64, "float16", False, config=BM64_BN64, seed=8),
    # issue 44's software-pipelined unmasked loop, forced on and off (several unmasked tiles)
    "S150-causal-overlap-BM32-BN16": case(
        1, 150, 2, 64, "float16", True, config={**BM32_BN16, "overlap": True}, seed=9
    ),
    "S150-bf16-no-overlap-BM32-BN16": case(
        1, 150, 1, 64, "bfloat16", False, config={**BM32_BN16, "overlap": False}, seed=19
    ),
}

SLOW_CASES = {
    "S200-causal-bf16-D128-B2H2": case(2, 200, 2, 128, "bfloat16", True, seed=10),
    "S200-fp16-D128-B2H2": case(2, 200, 2, 128, "float16", False, seed=11),
    "S129-causal-BM32-BN16": case(1, 129, 1, 64, "bfloat16", True, config=BM32_BN16, seed=12),
    "S100-causal-nosplit": case(
        1, 100, 1, 64, "float16", True, config={"split_diagonal": False}, seed=13
    ),
    "S100-causal-seqorder": case(
        1, 100, 1, 64, "float16", True, config={"heavy_first": False}, seed=14
    ),
    "S50-D16": case(1, 50, 2, 16, "float16", True, seed=15),
    "S50-D32": case(1, 50, 2, 32, "bfloat16", False, seed=16),
    "S40-D256": case(1, 40, 1, 256, "bfloat16", True, seed=17),
    "S300-causal-fp16-BM128-BN128": case(
        1, 300, 1, 64, "float16", True, config={"block_m": 128, "block_n": 128}, seed=18
    ),
}


@contextlib.contextmanager
def launched(module: types.ModuleType, name: str) -> Iterator[list[tuple[Any, dict]]]:
    """Within: each `module.name[grid](...)` launch noted as (grid, its keywords) and run;
    the kernel restored after."""
    kernel, launches = getattr(module, name), []

    class Noted:
        def __getitem__(self, grid: Any) -> Any:
            def launch(*args: Any, **kwargs: Any) -> Any:
                launches.append((grid, kwargs))
                return kernel[grid](*args, **kwargs)

            return launch

    setattr(module, name, Noted())
    try:
        yield launches
    finally:
        setattr(module, name, kernel)


def run_interpreted(
    cases: dict[str, dict[str, Any]], child: str = CHILD
) -> dict[str, dict[str, Any]]:
    """Each case's results from `child` (this module's, the backward's or the shapes' script)
    under Triton's interpreter in a fresh process; skipped without triton."""
    if not HAS_TRITON:
        pytest.skip("triton is not importable: no interpreter checks")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-c", child, json.dumps(list(cases.values())), str(REPO)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(
            f"interpreter child failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return dict(zip(cases, json.loads(lines[-1][len("RESULTS ") :]), strict=True))


@pytest.fixture(scope="module")
def fast_results() -> dict[str, dict[str, Any]]:
    return run_interpreted(FAST_CASES)


@pytest.fixture(scope="module")
def slow_results() -> dict[str, dict[str, Any]]:
    return run_interpreted(SLOW_CASES)


@pytest.mark.parametrize("name", list(FAST_CASES))
def test_interpreter_matches_float64(name: str, fast_results: dict[str, dict[str, Any]]) -> None:
    res = fast_results[name]
    assert res["meta"], "output shape/dtype differ from q's"
    assert res["finite"], "output holds NaN/inf"
    assert res["err"] < TOL, f"{name}: relative error {res['err']:.2e}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_CASES))
def test_interpreter_matches_float64_more(
    name: str, slow_results: dict[str, dict[str, Any]]
) -> None:
    res = slow_results[name]
    assert res["meta"] and res["finite"]
    assert res["err"] < TOL, f"{name}: relative error {res['err']:.2e}"


# ---------------------------------------------------------------------------------------
# CPU: input validation and loading through `kernels`
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mod() -> types.ModuleType:
    if not HAS_TRITON:
        pytest.skip("triton is not importable")
    return load_by_path()


@needs_triton
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"dtype": torch.float32}, "dtype"),
        ({"head_dim": 96}, "head_dim"),
        ({"head_dim": 512}, "head_dim"),
    ],
)
def test_rejects_bad_dtype_and_head_dim(
    mod: types.ModuleType, kwargs: dict[str, Any], match: str
) -> None:
    shape = (1, 8, 2, kwargs.get("head_dim", 64))
    q = torch.randn(shape).to(kwargs.get("dtype", torch.float16))
    with pytest.raises(ValueError, match=match):
        mod.flash_attn_func(q, q, q)


@needs_triton
def test_rejects_bad_shapes_and_mixed_inputs(mod: types.ModuleType) -> None:
    q = torch.randn(1, 8, 2, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="4-D"):
        mod.flash_attn_func(q[0], q[0], q[0])
    with pytest.raises(ValueError, match="same shape"):
        mod.flash_attn_func(q, q[:, :4], q)
    with pytest.raises(ValueError, match="one dtype"):
        mod.flash_attn_func(q, q.bfloat16(), q)
    with pytest.raises(ValueError, match=r"torch\.Tensor"):
        mod.flash_attn_func(q, q, q.numpy())
    with pytest.raises(ValueError, match="softmax_scale"):
        mod.flash_attn_func(q, q, q, softmax_scale=float("nan"))


@needs_triton
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="interpreter accepts CPU")
def test_rejects_cpu_tensors_without_interpreter(mod: types.ModuleType) -> None:
    q = torch.randn(1, 8, 2, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="CUDA"):
        mod.flash_attn_func(q, q, q)


@needs_triton
@pytest.mark.skipif(not HAS_KERNELS, reason="kernels is not importable")
def test_loads_through_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernels

    local = kernels.get_local_kernel(KERNEL_DIR)  # a pathlib.Path: a str is not accepted
    assert callable(local.flash_attn_func)
    assert "flash_attn_func" in local.__all__
    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-community/flash-attn2={KERNEL_DIR}")
    hub = kernels.get_kernel("kernels-community/flash-attn2", version=3)
    assert pathlib.Path(hub.__file__).resolve() == (BUILD_DIR / "__init__.py").resolve()
    assert callable(hub.flash_attn_func)


def test_metadata_json() -> None:
    meta = json.loads((BUILD_DIR / "metadata.json").read_text())
    assert meta == {
        "name": "flash-attn-triton",
        "id": "_flash_attn_triton_local",
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "backend": {"type": "cuda"},
    }


# ---------------------------------------------------------------------------------------
# GPU: the compiled kernel at realistic shapes
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_mod() -> types.ModuleType:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if HAS_KERNELS:
        import kernels

        return kernels.get_local_kernel(KERNEL_DIR)
    return load_by_path()


def poison_cuda_cache(nbytes: int) -> None:
    """Fill freed blocks of the caching allocator with NaN, so unwritten outputs show."""
    junk = torch.full((nbytes // 2 + 1,), float("nan"), dtype=torch.float16, device="cuda")
    del junk


GPU_MATRIX = [
    pytest.param(S, D, dt, causal, id=f"S{S}-D{D}-{str(dt)[6:]}-{'causal' if causal else 'full'}")
    for S in (1000, 2048)
    for D in (64, 128)
    for dt in (torch.float16, torch.bfloat16)
    for causal in (False, True)
]


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("seqlen, head_dim, dtype, causal", GPU_MATRIX)
def test_gpu_fixed_config_matches_float64(
    gpu_mod: types.ModuleType, seqlen: int, head_dim: int, dtype: torch.dtype, causal: bool
) -> None:
    torch.manual_seed(seqlen + head_dim)
    q, k, v = make_qkv(2, seqlen, 8, head_dim, dtype, device="cuda")
    poison_cuda_cache(q.numel() * 2)
    out = gpu_mod.flash_attn_func_with_config(
        q, k, v, causal=causal, block_m=128, block_n=64, num_warps=8, num_stages=3
    )
    torch.cuda.synchronize()
    assert out.shape == q.shape and out.dtype == dtype
    assert out.isfinite().all()
    assert rel_err(out, reference(q, k, v, causal)) < TOL


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize(
    "seqlen, head_dim",
    [(1000, 128), (2048, 128), (1000, 64), (2048, 64)],
)
def test_gpu_autotuned_matches_float64(
    gpu_mod: types.ModuleType, seqlen: int, head_dim: int
) -> None:
    torch.manual_seed(7 * seqlen + head_dim)
    q, k, v = make_qkv(2, seqlen, 8, head_dim, torch.bfloat16, device="cuda")
    poison_cuda_cache(q.numel() * 2)
    out = gpu_mod.flash_attn_func(q, k, v, causal=True)
    torch.cuda.synchronize()
    assert out.isfinite().all()
    assert rel_err(out, reference(q, k, v, True)) < TOL
    assert gpu_mod.last_autotune_config() is not None


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("layout", ["bhsd", "strided"])
def test_gpu_non_contiguous(gpu_mod: types.ModuleType, layout: str) -> None:
    torch.manual_seed(3)
    q, k, v = make_qkv(2, 1000, 8, 128, torch.bfloat16, device="cuda", layout=layout)
    out = gpu_mod.flash_attn_func(q, k, v, causal=True)
    assert rel_err(out, reference(q, k, v, True)) < TOL


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("head_dim", [16, 32, 256])
def test_gpu_other_head_dims(gpu_mod: types.ModuleType, head_dim: int) -> None:
    torch.manual_seed(head_dim)
    q, k, v = make_qkv(2, 333, 4, head_dim, torch.bfloat16, device="cuda")
    for causal in (False, True):
        out = gpu_mod.flash_attn_func(q, k, v, causal=causal)
        assert rel_err(out, reference(q, k, v, causal)) < TOL


@pytest.mark.gpu
@needs_cuda
@pytest.mark.skipif(not HAS_KERNELS, reason="kernels is not importable")
def test_gpu_loaded_through_kernels_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernels

    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-community/flash-attn2={KERNEL_DIR}")
    fa = kernels.get_kernel("kernels-community/flash-attn2", version=3)
    torch.manual_seed(4)
    q, k, v = make_qkv(1, 333, 4, 64, torch.float16, device="cuda")
    out = fa.flash_attn_func(q=q, k=k, v=v, causal=True)
    assert rel_err(out, reference(q, k, v, True)) < TOL
