"""Float32 products on tensor cores, for the logits check's float32 reference.

The reference's linear layers (projections, MLP, LM head) are most of its time: float32
GEMMs run on the H100's SIMT units (~0.4 s of a 1.0 s Model click, docs/results-model.md).
Their weights come from a bfloat16 model, so each is exact in bfloat16. A float32 activation
splits into three bfloat16 parts (hi + mid + lo carry its 24-bit significand); each part times
the bfloat16 weight is exact in float32, and the tensor cores accumulate in float32
(`torch.mm`'s `out_dtype`). On a CPU the sum is the float32 product to float32 rounding; on
an H100 the logits of Llama-3.1-8B's 2 layers came within 2.3e-5 of the float32 GEMMs' (of the
largest logit: the tensor cores' accumulation keeps fewer bits than IEEE float32), a thousandth
of the bfloat16 errors the check reports (1e-2), in 0.17 s instead of 0.43 s. Written here
because torch offers no float32 GEMM from bfloat16 parts.
"""

from __future__ import annotations

from functools import partial

import torch


def split3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three bfloat16 tensors whose float32 sum is `x` (float32) to its last bit."""
    hi = x.to(torch.bfloat16)
    rest = x - hi.float()
    mid = rest.to(torch.bfloat16)
    lo = (rest - mid.float()).to(torch.bfloat16)
    return hi, mid, lo


def _mm_float32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """bfloat16 × bfloat16 accumulated in float32: the tensor cores on a GPU; elsewhere the
    same exact products in a float32 GEMM (torch has no CPU kernel with `out_dtype`)."""
    if a.is_cuda:
        return torch.mm(a, b, out_dtype=torch.float32)
    return a.float() @ b.float()


def exact_product(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (float32, [..., in]) @ weight.T (bfloat16, [out, in]) to float32 accuracy."""
    flat = x.reshape(-1, x.shape[-1])
    transposed = weight.t()
    hi, mid, lo = split3(flat)
    out = _mm_float32(lo, transposed)  # smallest first
    out += _mm_float32(mid, transposed)
    out += _mm_float32(hi, transposed)
    return out.reshape(*x.shape[:-1], weight.shape[0])


def _exact_linear(module: torch.nn.Linear, weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    out = exact_product(x, weight)
    return out if module.bias is None else out + module.bias


def exact_linears(reference: torch.nn.Module, model: torch.nn.Module) -> int:
    """Route each nn.Linear of `reference` (the float32 copy) through `exact_product` with the
    bfloat16 weight of `model`'s same module (shared, not copied); the count patched. Weights
    of another dtype are left to float32 GEMMs (float16 is not exact in bfloat16)."""
    patched = 0
    for name, module in reference.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        original = model.get_submodule(name).weight
        if original.dtype != torch.bfloat16:
            continue
        module.forward = partial(_exact_linear, module, original.detach())
        patched += 1
    return patched
