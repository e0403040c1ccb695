"""Issue 44, step 12 adopted: the default route sends the shapes the warp-specialised Gluon
forward won (head_dim 128, no window, q_len >= 4096) to flash_gluon_ws, where it can run.

CPU: the route's rule, read off `_takes_gluon_ws` with the hardware check said true, and its
refusals (window, head dim, short q, a non-contiguous q, the switch off, the interpreter).
GPU (`-m gpu`, an sm_90 card): flash_attn_func at S4096 launches the Gluon kernel, its output
and LSE match float64's, and a training step through it gives the two-pass gradients.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.attention.test_flash_triton import launched, load_by_path, rel_err


@pytest.fixture
def fwd(monkeypatch) -> Any:
    """flash_fwd with the GPU's checks said true, so the rule alone decides."""
    mod = load_by_path()
    monkeypatch.setattr(mod.flash_fwd, "INTERPRET", False)
    monkeypatch.setattr(mod.flash_fwd.flash_gluon_ws, "available", lambda: True)
    monkeypatch.setattr(mod.flash_fwd, "tma_eligible", lambda q, k, v: True)
    return mod.flash_fwd


def qkv(seq: int = 4096, head_dim: int = 128) -> tuple[torch.Tensor, ...]:
    q = torch.empty(1, seq, 4, head_dim, dtype=torch.bfloat16, device="meta")
    return q, q[:, :, :2], q[:, :, :2]


def test_the_route_takes_the_shapes_it_won(fwd, monkeypatch) -> None:
    assert fwd._takes_gluon_ws(*qkv(), windowed=False)
    assert fwd._takes_gluon_ws(*qkv(seq=8192), windowed=False)
    assert not fwd._takes_gluon_ws(*qkv(), windowed=True)
    assert not fwd._takes_gluon_ws(*qkv(seq=4095), windowed=False)
    assert not fwd._takes_gluon_ws(*qkv(head_dim=64), windowed=False)
    q, k, v = qkv()
    heads_first = torch.empty(1, 4, 4096, 128, dtype=q.dtype, device="meta").transpose(1, 2)
    assert heads_first.shape == q.shape and not heads_first.is_contiguous()
    assert not fwd._takes_gluon_ws(heads_first, k, v, windowed=False)
    monkeypatch.setattr(fwd, "GLUON_WS_FORWARD", False)
    assert not fwd._takes_gluon_ws(*qkv(), windowed=False)
    monkeypatch.setattr(fwd, "GLUON_WS_FORWARD", True)
    monkeypatch.setattr(fwd, "INTERPRET", True)
    assert not fwd._takes_gluon_ws(*qkv(), windowed=False)


def test_where_gluon_cannot_run_the_shapes_stay_on_tma(fwd, monkeypatch) -> None:
    monkeypatch.setattr(fwd.flash_gluon_ws, "available", lambda: False)
    assert not fwd._takes_gluon_ws(*qkv(), windowed=False)
    monkeypatch.setattr(fwd.flash_gluon_ws, "available", lambda: True)
    monkeypatch.setattr(fwd, "tma_eligible", lambda q, k, v: False)
    assert not fwd._takes_gluon_ws(*qkv(), windowed=False)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("heads", "kv_heads", "causal"), [(4, 4, True), (8, 2, True), (4, 4, False)]
)
def test_gpu_the_default_route_runs_the_gluon_forward_and_trains_through_it(
    heads: int, kv_heads: int, causal: bool
) -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU (H100/H200): run `pytest -m gpu` there")
    from tests.attention.test_flash_triton_shapes import reference_attention

    mod = load_by_path()
    torch.manual_seed(heads + kv_heads)
    q = torch.randn(1, 4096, heads, 128, dtype=torch.bfloat16, device="cuda")
    k, v = (torch.randn(1, 4096, kv_heads, 128, dtype=torch.bfloat16, device="cuda") for _ in "kv")
    dout = torch.randn_like(q)
    with launched(mod.flash_gluon_ws, "_flash_fwd_ws_kernel") as launches:
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        out = mod.flash_attn_func(*leaves, causal=causal)
        out.backward(dout)
    assert len(launches) == 1, "the default route did not take the Gluon forward"
    ref_leaves = [x.double().requires_grad_() for x in (q, k, v)]
    ref = reference_attention(*ref_leaves, causal, (-1, -1))
    ref.backward(dout.double())
    assert out.is_contiguous() and rel_err(out.detach(), ref.detach()) < 1e-2
    for x, r in zip(leaves, ref_leaves, strict=True):
        assert rel_err(x.grad, r.grad) < 2e-2  # the backward read the Gluon forward's LSE
