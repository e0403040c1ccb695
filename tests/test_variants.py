"""Every variant computes the same function as float64 attention, on fresh random inputs."""

from __future__ import annotations

import pytest
import torch

from attention import VARIANTS, Problem, availability
from tests.conftest import TOLERANCE, reference_attention, rel_err

CPU_VARIANTS = [vid for vid, reason in availability("cpu", torch.float32).items() if reason is None]
FAST = [v for v in CPU_VARIANTS if VARIANTS[v].family != "compiled"]
COMPILED = [v for v in CPU_VARIANTS if VARIANTS[v].family == "compiled"]


def run_variant(vid: str, b: int, h: int, s: int, d: int, causal: bool, dtype, device="cpu"):
    variant = VARIANTS[vid]
    q, k, v = (torch.randn(b, h, s, d, dtype=dtype, device=device) for _ in range(3))
    built = variant.build(Problem(b, h, s, d, causal, dtype, device))
    args = (q, k, v) if variant.layout == "bhsd" else tuple(x.transpose(1, 2) for x in (q, k, v))
    with torch.no_grad(), variant.context():
        out = built.forward(*args)
    if variant.layout == "bshd":
        out = out.transpose(1, 2)
    assert out.shape == q.shape and out.dtype == dtype
    return rel_err(out, reference_attention(q, k, v, causal))


def test_cpu_has_the_post_variants():
    assert {"naive", "naive-inplace", "sdpa-math", "sdpa-flash", "sdpa-auto"} <= set(CPU_VARIANTS)


@pytest.mark.parametrize("vid", FAST)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [True, False])
def test_matches_float64_reference(vid, dtype, causal):
    shapes = [(2, 3, 64, 32), (1, 2, 100, 64)]  # 100: not a power of two
    for shape in shapes:
        assert run_variant(vid, *shape, causal, dtype) < TOLERANCE[dtype], shape


@pytest.mark.slow
@pytest.mark.parametrize("vid", COMPILED)
@pytest.mark.parametrize("causal", [True, False])
def test_compiled_matches_float64_reference(vid, causal):
    assert run_variant(vid, 1, 2, 128, 64, causal, torch.float32) < TOLERANCE[torch.float32]


def test_wrong_result_is_caught():
    """The tolerance must reject a real mistake: non-causal output checked as causal."""
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 64, 32) for _ in range(3))
    wrong = reference_attention(q, k, v, causal=False)
    assert rel_err(wrong, reference_attention(q, k, v, causal=True)) > 0.1


def test_every_variant_has_what_the_page_needs():
    for vid, v in VARIANTS.items():
        assert v.id == vid and v.label and v.lesson and v.layout in ("bhsd", "bshd")


@pytest.mark.parametrize(
    "vid",
    [
        "sdpa-efficient",
        "sdpa-cudnn",
        "kernels-flash-attn2",
        "kernels-flash-attn3",
        "kernels-local-triton",
    ],
)
def test_gpu_only_variants_say_why_on_cpu(vid):
    reason = availability("cpu", torch.bfloat16)[vid]
    assert reason and ("CUDA" in reason or "not installed" in reason)
