"""Issue 44, step 15: the warp-specialised Gluon dK/dV kernel (flash_gluon_bwd.py).

CPU: which shapes it takes (`takes`: no GQA, no window, head_dim 64/128, fp16/bf16,
TMA-addressable tensors) and that the route asks for it only when switched on and where it
can run (`flash_bwd._takes_gluon_ws_dkdv`). GPU (`-m gpu`, an sm_90 card): with the route
switched on, a training step launches the kernel once and its gradients match float64
autograd at ragged, causal and non-causal shapes, rows that see no key, D64 and fp16.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.attention.test_flash_triton import launched, load_by_path, rel_err


@pytest.fixture
def bwd() -> Any:
    return load_by_path().flash_bwd


def tensors(heads: int = 4, kv_heads: int = 4, head_dim: int = 128,
            dtype: torch.dtype = torch.bfloat16) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """(q, k, v, dout, lse, delta, dk, dv) on the meta device, [B, S, H, D] contiguous."""
    q = torch.empty(2, 300, heads, head_dim, dtype=dtype, device="meta")
    k = torch.empty(2, 200, kv_heads, head_dim, dtype=dtype, device="meta")
    rows = torch.empty(2, heads, 300, dtype=torch.float32, device="meta")
    return q, k, k.clone(), q.clone(), rows, rows.clone(), k.clone(), k.clone()


def takes(bwd: Any, t: tuple[torch.Tensor, ...], windowed: bool = False) -> bool:
    q, k, v, dout, _lse, _delta, dk, _dv = t
    return bwd.flash_gluon_bwd.takes(q, k, v, dout, dk, windowed)


def test_it_takes_one_query_head_per_kv_head_with_no_window(bwd) -> None:
    assert takes(bwd, tensors())
    assert takes(bwd, tensors(head_dim=64))
    assert takes(bwd, tensors(dtype=torch.float16))
    assert not takes(bwd, tensors(), windowed=True)
    assert not takes(bwd, tensors(heads=8, kv_heads=2))  # GQA: the Triton kernel sums heads
    assert not takes(bwd, tensors(head_dim=96))
    assert not takes(bwd, tensors(head_dim=256))
    assert not takes(bwd, tensors(dtype=torch.float32))


def test_it_refuses_tensors_tma_cannot_address(bwd) -> None:
    t = list(tensors())
    strided = torch.empty(2, 300, 4, 129, dtype=torch.bfloat16, device="meta")[..., :128]
    assert strided.stride(-1) == 1 and not strided.is_contiguous()
    for i in (0, 1, 2, 3, 6):  # q, k, v, dout, dk: each one TMA reads or writes
        odd = list(t)
        odd[i] = strided if i in (0, 3) else strided[:, :200]
        assert not takes(bwd, tuple(odd)), f"tensor {i}"


def test_the_route_asks_only_when_switched_on_and_where_it_runs(bwd, monkeypatch) -> None:
    meta = {"WINDOW": False}
    monkeypatch.setattr(bwd, "INTERPRET", False)
    monkeypatch.setattr(bwd.flash_gluon_bwd, "available", lambda: True)
    monkeypatch.setattr(bwd, "GLUON_WS_DKDV", True)
    assert bwd._takes_gluon_ws_dkdv(tensors(), meta)
    assert not bwd._takes_gluon_ws_dkdv(tensors(), {"WINDOW": True})
    assert not bwd._takes_gluon_ws_dkdv(tensors(heads=8, kv_heads=2), meta)
    monkeypatch.setattr(bwd, "GLUON_WS_DKDV", False)
    assert not bwd._takes_gluon_ws_dkdv(tensors(), meta)
    monkeypatch.setattr(bwd, "GLUON_WS_DKDV", True)
    monkeypatch.setattr(bwd.flash_gluon_bwd, "available", lambda: False)
    assert not bwd._takes_gluon_ws_dkdv(tensors(), meta)
    monkeypatch.setattr(bwd.flash_gluon_bwd, "available", lambda: True)
    monkeypatch.setattr(bwd, "INTERPRET", True)
    assert not bwd._takes_gluon_ws_dkdv(tensors(), meta)


# (batch, heads, q_len, kv_len, head_dim, causal, dtype)
GPU_CASES = [
    (2, 4, 300, 300, 128, True, torch.bfloat16),
    (2, 4, 100, 300, 128, True, torch.bfloat16),
    (2, 4, 300, 100, 128, True, torch.bfloat16),  # the first 200 rows see no key
    (2, 4, 200, 333, 128, False, torch.bfloat16),
    (1, 4, 1000, 1000, 128, True, torch.float16),
    (2, 4, 256, 256, 64, True, torch.bfloat16),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
def test_gpu_the_gluon_dkdv_pass_gives_float64s_gradients(case: tuple, monkeypatch) -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU (H100/H200): run `pytest -m gpu` there")
    from tests.attention.test_flash_triton_shapes import reference_attention

    batch, heads, sq, sk, head_dim, causal, dtype = case
    mod = load_by_path()
    monkeypatch.setattr(mod.flash_bwd, "GLUON_WS_DKDV", True)
    torch.manual_seed(sq + sk + head_dim)
    q, dout = (torch.randn(batch, sq, heads, head_dim, dtype=dtype, device="cuda") for _ in "qd")
    k, v = (torch.randn(batch, sk, heads, head_dim, dtype=dtype, device="cuda") for _ in "kv")
    with launched(mod.flash_gluon_bwd, "_flash_bwd_dkdv_ws_kernel") as launches:
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        mod.flash_attn_func(*leaves, causal=causal).backward(dout)
    assert len(launches) == 1, "the route did not take the Gluon dK/dV kernel"
    ref_leaves = [x.double().requires_grad_() for x in (q, k, v)]
    reference_attention(*ref_leaves, causal, (-1, -1)).backward(dout.double())
    for name, x, r in zip("qkv", leaves, ref_leaves, strict=True):
        assert rel_err(x.grad, r.grad) < 1e-2, f"d{name}"
