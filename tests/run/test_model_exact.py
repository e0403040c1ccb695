"""The float32 reference's linear layers as three bfloat16 products (profiling/run/model/
exact.py): the parts carry every bit of a float32 activation, the product is float32-accurate,
and the reference's logits equal the float32 GEMMs' (on a CPU the same exact products run as a
float32 GEMM; tests/gpu/test_gpu_model.py checks the tensor cores' path)."""

from __future__ import annotations

import torch

from profiling.run.model import build as building
from profiling.run.model.exact import exact_product, split3
from profiling.run.model.steps import real_logits
from profiling.workload.model.spec import ModelWorkload

RAGGED = {"batch": 2, "seq_len": 32, "lengths": "32,20", "steps": 1}


def _activations() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 96, generator=generator, dtype=torch.float64)
    scale = torch.logspace(-3, 3, 96, dtype=torch.float64)  # magnitudes over six decades
    return (x * scale).float()


def test_three_bfloat16_parts_sum_to_the_float32_value_exactly():
    x = _activations()
    hi, mid, lo = split3(x)
    assert hi.dtype == mid.dtype == lo.dtype == torch.bfloat16
    assert torch.equal(hi.double() + mid.double() + lo.double(), x.double())


def test_the_product_is_float32_accurate():
    x = _activations()
    generator = torch.Generator().manual_seed(2)
    weight = (torch.randn(48, 96, generator=generator) * 0.02).bfloat16()
    exact = x.double() @ weight.double().t()
    scale = float(exact.abs().max())
    float32_gemm = float((x @ weight.float().t()).double().sub(exact).abs().max()) / scale
    ours = float(exact_product(x, weight).double().sub(exact).abs().max()) / scale
    bf16_activations = float((x.bfloat16().float() @ weight.float().t()).double().sub(exact)
                             .abs().max()) / scale  # fmt: skip
    print(f"relative error: float32 GEMM {float32_gemm:.1e}, three parts {ours:.1e}, "
          f"bfloat16 activations {bf16_activations:.1e}")  # fmt: skip
    assert ours <= max(4 * float32_gemm, 1e-7)
    assert bf16_activations > 100 * ours  # the test can tell a part missing


def test_a_bfloat16_models_reference_gives_the_float32_gemms_logits():
    workload = ModelWorkload.from_user(preset="tiny-gemma-2", dtype="bfloat16", **RAGGED)
    model, _ = building.build(workload, "cpu")
    inputs = building.batch(workload, "cpu")
    plain = building.float32_copy(model)
    routed = building.float32_copy(model, exact=True)
    linears = [m for m in routed.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all("_exact_linear" in repr(m.forward) for m in linears)
    assert not any("_exact_linear" in repr(m.forward) for m in plain.modules())
    expected, got = real_logits(plain, inputs), real_logits(routed, inputs)
    difference = float((got - expected).abs().max() / expected.abs().max())
    print(f"exact vs float32 GEMM logits: {difference:.1e}")
    assert difference < 1e-5
