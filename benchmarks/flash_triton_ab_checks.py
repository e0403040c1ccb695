"""The float64 checks of issue 44's A/B (bench_flash_triton_ab.py): every candidate path of
the new Triton FlashAttention against float64 outputs and gradients, at small shapes."""

from __future__ import annotations

from typing import Any

import torch

from benchmarks.bench_flash_triton_ab import (
    BF16,
    DKDV_SWEEP,
    DQ_SWEEP,
    FWD_SWEEP,
    GQA_SWEEP,
    OVERLAP_SWEEP,
    flags,
    fwd_config,
    rel,
)  # fmt: skip


def check_float64(mods: dict[str, Any]) -> dict[str, float]:
    """Relative errors against float64 (outputs and gradients) for every candidate path."""

    new, errs = mods["new"], {}
    cases = {  # (B, H, KV, q_len, kv_len, D, window, fixed config or None, grad)
        "MHA causal D128 S1000": (2, 4, 4, 1000, 1000, 128, (-1, -1), None, True),
        "MHA causal D64 S1000": (2, 4, 4, 1000, 1000, 64, (-1, -1), None, True),
        "GQA causal D128 S1000": (2, 8, 2, 1000, 1000, 128, (-1, -1), None, True),
        "GQA q700 kv1000 window": (1, 8, 2, 700, 1000, 128, (100, 0), None, True),
        "MQA causal D64 S333": (1, 6, 1, 333, 333, 64, (-1, -1), None, False),
        "decode q1 kv2048": (2, 8, 2, 1, 2048, 128, (-1, -1), None, False),
    }
    mha = [(c, False, False) for c in FWD_SWEEP] + [(c, True, False) for c in OVERLAP_SWEEP]
    for cfg, overlap, pack in mha + [(c, False, True) for c in GQA_SWEEP]:
        h, kvh = (8, 2) if pack else (2, 2)
        cases[f"{h}/{kvh} heads S1000 {cfg} overlap={overlap} pack={pack}"] = (
            1, h, kvh, 1000, 1000, 128, (-1, -1),
            fwd_config(*cfg, OVERLAP=overlap, PACK_GQA=pack), False,
        )  # fmt: skip
    flags(new, True, True)
    for name, case in cases.items():
        try:
            errs |= check_case(new, name, *case)
        except Exception as e:  # a config that cannot compile is said, not counted
            if not cannot_compile(e):  # anything else is a failed check
                errs[name] = float("inf")
            why = "cannot compile, not checked" if cannot_compile(e) else "FAILED"
            print(f"check {name}: {why}: {type(e).__name__}: {str(e)[:160]}", flush=True)
    return errs | check_backward_tiles(new)


def cannot_compile(e: Exception) -> bool:
    """Whether an exception says the config cannot be built for this GPU (too much shared
    memory or registers, a compiler pass that refuses it), not that it computed wrong."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    return isinstance(e, (OutOfResources, CompilationError)) or "PassManager" in str(e)


def check_case(
    new: Any, name: str, b: int, h: int, kvh: int, sq: int, sk: int, d: int,
    window: tuple[int, int], config: dict | None, grad: bool,
) -> dict[str, float]:  # fmt: skip
    """One case's output (and gradient) errors against float64."""
    from tests.attention.test_flash_triton_shapes import reference_attention

    torch.manual_seed(len(name))
    q = torch.randn(b, sq, h, d, device="cuda", dtype=BF16, requires_grad=grad)
    k, v = (torch.randn(b, sk, kvh, d, device="cuda", dtype=BF16, requires_grad=grad)
            for _ in "kv")  # fmt: skip
    if config is None:
        out = new.flash_attn_func(q, k, v, causal=True, window_size=window)
    else:
        out = new.flash_fwd._launch(q, k, v, None, True, config, window_size=window)[0]
    leaves = [x.detach().double().requires_grad_(grad) for x in (q, k, v)]
    ref = reference_attention(*leaves, causal=True, window_size=window)
    errs = {name: rel(out, ref)}
    if grad:
        dout = torch.randn_like(out)
        out.backward(dout)
        ref.backward(dout.double())
        for x, r, g in zip((q, k, v), leaves, "qkv", strict=True):
            errs[f"{name} d{g}"] = rel(x.grad, r.grad)
    return errs


def check_backward_tiles(new: Any) -> dict[str, float]:
    """Every backward tile candidate against float64 gradients (B1 H2 S300 D128)."""
    from tests.attention.test_flash_triton_shapes import reference_attention

    errs = {}
    default = new.default_backward_config(128)
    configs = [new.BackwardConfig(new.TileConfig(*t), default.dq) for t in DKDV_SWEEP]
    configs += [new.BackwardConfig(default.dkdv, new.TileConfig(*t)) for t in DQ_SWEEP[1:]]
    torch.manual_seed(0)
    base = [torch.randn(1, 300, 2, 128, device="cuda", dtype=BF16) for _ in "qkv"]
    leaves = [x.double().requires_grad_(True) for x in base]
    ref = reference_attention(*leaves, causal=True)
    dout = torch.randn_like(ref)
    ref.backward(dout)
    for config in configs:
        xs = [x.clone().requires_grad_(True) for x in base]
        out = new.flash_attn_func_with_config(*xs, causal=True, backward_config=config)
        out.backward(dout.to(BF16))
        for x, r, g in zip(xs, leaves, "qkv", strict=True):
            errs[f"bwd {config.short()} d{g}"] = rel(x.grad, r.grad)
    return errs
