"""Inference shapes of the Triton FlashAttention (issue 21): GQA, q_len != kv_len with
bottom-right causal, sliding windows, rows that see no key, and the split-KV decode path.

CPU: the kernels run under Triton's interpreter in a child process (as in
test_flash_triton.py) that prints each case's errors as JSON. GPU tests (`-m gpu`) run the
three presets of the app against float64 on a subset of heads and against SDPA.
Reference: `reference_attention`, written from the API's definitions in float64.
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tests.attention.test_flash_triton import HAS_TRITON, load_by_path, rel_err, run_interpreted

TOL = {"float16": 3e-3, "bfloat16": 2e-2}  # outputs and gradients; a wrong one reads ~1


def visible_keys(
    q_len: int, kv_len: int, causal: bool, window_size: tuple[int, int], device: Any = "cpu"
) -> torch.Tensor:
    """[q_len, kv_len] bool: query i sees key j iff i + kv_len - q_len - left <= j <=
    i + kv_len - q_len + right (bottom-right aligned; -1 unbounded; right = 0 if causal)."""
    left, right = window_size
    right = 0 if causal else right
    diag = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
    j = torch.arange(kv_len, device=device)[None, :]
    seen = torch.ones(q_len, kv_len, dtype=torch.bool, device=device)
    if right >= 0:
        seen &= j <= diag + right
    if left >= 0:
        seen &= j >= diag - left
    return seen


def reference_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    scale: float | None = None,
) -> torch.Tensor:
    """float64 attention, FlashAttention's conventions: q [B, Sq, H, D], k and v
    [B, Sk, KVH, D], query head h reads K/V head h // (H // KVH); a row that sees no key
    outputs 0. Differentiable (no NaN in the graph for such rows)."""
    group = q.shape[2] // k.shape[2]
    qd = q.to(torch.float64).transpose(1, 2)  # (B, H, Sq, D)
    kd, vd = (x.to(torch.float64).transpose(1, 2).repeat_interleave(group, 1) for x in (k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    seen = visible_keys(q.shape[1], k.shape[1], causal, window_size, q.device)
    some = seen.any(-1, keepdim=True)  # (Sq, 1): rows that see at least one key
    scores = (qd @ kd.transpose(-1, -2) * scale).masked_fill(~seen, float("-inf"))
    probs = scores.masked_fill(~some, 0.0).softmax(-1) * some  # empty rows: all zero
    return (probs @ vd).transpose(1, 2)


# ---------------------------------------------------------------------------------------
# CPU: Triton interpreter in a child process
# ---------------------------------------------------------------------------------------


def case(
    Sq: int, Sk: int, H: int, KVH: int, dtype: str = "float16", *, causal: bool = False,
    window: tuple[int, int] = (-1, -1), B: int = 1, D: int = 64, path: str = "func",
    splits: int | None = None, grad: bool = False, poison: int = 0, tiles: int = 0,
    seed: int = 0, config: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """path: "func" (flash_attn_func), "fixed" (tiles x tiles launch) or "decode" (the split-KV
    path forced, block_n 32); poison: keys [0, poison) hold NaN: no row sees them, and no
    tile of any kernel holds one of them and a visible key, so only a tile that should have
    been skipped reads them (NaN * 0 is NaN: the output or a gradient turns non-finite)."""
    return {
        "B": B, "Sq": Sq, "Sk": Sk, "H": H, "KVH": KVH, "D": D, "dtype": dtype,
        "causal": causal, "window": list(window), "path": path, "splits": splits,
        "grad": grad, "poison": poison, "tiles": tiles, "seed": seed, "config": config or {},
    }  # fmt: skip


# The launches a case counts: name -> (module attribute holding the function, its name).
COUNTED = {
    "decode": ("flash_autograd", "flash_decode"), "tma": ("flash_fwd", "launch_tma"),
    "dkdv tma": ("flash_bwd", "launch_dkdv_tma"), "dq tma": ("flash_bwd", "launch_dq_tma"),
    "atomic dq": ("flash_bwd", "finish_atomic_dq"),  # test_flash_triton_atomic.py's cases
}  # fmt: skip


@contextlib.contextmanager
def counted(mod: types.ModuleType) -> Iterator[dict[str, int]]:
    """Within: each COUNTED function counts its calls (and still runs); restored after."""
    calls = dict.fromkeys(COUNTED, 0)
    real = {name: getattr(getattr(mod, where), attr) for name, (where, attr) in COUNTED.items()}

    def counting(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real[name](*args, **kwargs)

        return call

    for name, (where, attr) in COUNTED.items():
        setattr(getattr(mod, where), attr, counting(name))
    try:
        yield calls
    finally:
        for name, (where, attr) in COUNTED.items():
            setattr(getattr(mod, where), attr, real[name])


def run_case(mod: types.ModuleType, c: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    """One case: output (and gradients) against reference_attention, plus what tests read."""
    torch.manual_seed(c["seed"])
    dtype = getattr(torch, c["dtype"])
    q = torch.randn(c["B"], c["Sq"], c["H"], c["D"], dtype=dtype, device=device)
    k, v = (
        torch.randn(c["B"], c["Sk"], c["KVH"], c["D"], dtype=dtype, device=device) for _ in "kv"
    )
    k[:, : c["poison"]] = float("nan")
    v[:, : c["poison"]] = float("nan")
    leaves = [x.clone().requires_grad_(c["grad"]) for x in (q, k, v)]
    kw = {"causal": c["causal"], "window_size": tuple(c["window"])}
    config = dict(c["config"])
    if "bwd_tma" in config:  # issue 44's TMA backward kernels at these (dkdv, dq) tiles
        dkdv, dq = (mod.TileConfig(*tiles, 4, 1, tma=True) for tiles in config.pop("bwd_tma"))
        config["backward_config"] = mod.BackwardConfig(dkdv, dq)
    if "bwd_atomic" in config:  # dQ summed by atomics in the dK/dV pass, at these tiles
        dkdv, dq = (mod.TileConfig(*tiles, 4, 1) for tiles in config.pop("bwd_atomic"))
        config["backward_config"] = mod.BackwardConfig(dkdv, dq, atomic_dq=True)
    with counted(mod) as calls:
        if c["path"] == "decode":
            out = mod.flash_attn_decode(*leaves, **kw, num_splits=c["splits"], block_n=32)
        elif c["path"] == "fixed":
            t = c["tiles"]
            out = mod.flash_attn_func_with_config(*leaves, **kw, block_m=t, block_n=t, **config)
        else:
            out = mod.flash_attn_func(*leaves, **kw)
        if c["grad"]:
            dout = torch.randn_like(out)
            out.backward(dout)
    ref_leaves = [x.detach().clone().requires_grad_(c["grad"]) for x in (q, k, v)]
    ref = reference_attention(*[x.nan_to_num(0.0) for x in ref_leaves], **kw)
    seen = visible_keys(c["Sq"], c["Sk"], c["causal"], tuple(c["window"]), device).any(-1)
    res: dict[str, Any] = {
        "out": rel_err(out.detach(), ref.detach()), **{f"{k} calls": n for k, n in calls.items()},
        "meta": out.shape == q.shape and out.dtype == dtype,
        "finite": bool(out.isfinite().all()), "empty rows": int((~seen).sum()),
        "empty rows zero": bool((out.detach()[:, ~seen] == 0).all()),
    }  # fmt: skip
    if c["grad"]:
        ref.backward(dout.to(torch.float64))
        for name, x, r in zip("qkv", leaves, ref_leaves, strict=True):
            g, rg = x.grad, r.grad.nan_to_num(0.0)
            res[f"d{name}"] = rel_err(g, rg) if g.isfinite().all() else float("inf")
            res[f"d{name} meta"] = g.shape == x.shape and g.dtype == dtype
    return res


CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from tests.attention import test_flash_triton, test_flash_triton_shapes as ts
mod = test_flash_triton.load_by_path()
print("RESULTS " + json.dumps([ts.run_case(mod, c) for c in json.loads(sys.argv[1])]))
"""

CASES = {
    "gqa-H4-KV2-causal-fp16-grad": case(70, 70, 4, 2, causal=True, grad=True),
    "mqa-H4-KV1-full-bf16-grad": case(50, 50, 4, 1, "bfloat16", grad=True, seed=1),
    "q<kv-causal-grad": case(40, 100, 2, 2, causal=True, grad=True, seed=2),
    "q>kv-causal-grad": case(100, 40, 4, 1, causal=True, grad=True, seed=3),
    "q<kv-full-bf16": case(30, 90, 2, 1, "bfloat16", seed=4),
    "q>kv-full-fp16": case(90, 30, 2, 2, seed=5),
    "window-left-only-tiles16-grad": case(
        100, 100, 2, 1, window=(20, -1), path="fixed", tiles=16, grad=True, seed=6
    ),
    "window-left-right-bf16-grad": case(70, 90, 2, 2, "bfloat16", window=(10, 5), grad=True),
    "causal-window-left-gqa-grad": case(
        80, 80, 4, 2, causal=True, window=(24, -1), path="fixed", tiles=16, grad=True, seed=8
    ),
    "no-key-rows-grad": case(60, 20, 2, 2, window=(3, 0), grad=True, seed=9),
    "window-skips-tiles-poisoned": case(
        16,
        256,
        2,
        1,
        causal=True,
        window=(15, -1),
        path="fixed",
        tiles=16,
        poison=192,
        grad=True,
        seed=10,
    ),
    # issue 44's GQA row packing, forced on and off: group 2 (8 positions a 16-row tile),
    # group 6 (tiles start mid-position), with the pipelined unmasked loop and a window
    "gqa-packed-causal-tiles16-grad": case(
        70,
        70,
        4,
        2,
        causal=True,
        path="fixed",
        tiles=16,
        grad=True,
        seed=17,
        config={"pack_gqa": True, "overlap": True},
    ),
    "gqa-plain-causal-tiles16-grad": case(
        70,
        70,
        4,
        2,
        causal=True,
        path="fixed",
        tiles=16,
        grad=True,
        seed=18,
        config={"pack_gqa": False, "overlap": False},
    ),
    "mqa-packed-group6-q<kv-window-bf16-grad": case(
        40,
        100,
        6,
        1,
        "bfloat16",
        causal=True,
        window=(30, -1),
        path="fixed",
        tiles=16,
        grad=True,
        seed=19,
        config={"pack_gqa": True},
    ),
    # issue 44's TMA forward (flash_tma.py), forced on: GQA, q_len != kv_len with a window,
    # rows that see no key, a window that must skip poisoned tiles, warp specialisation asked
    # for, and a packed-GQA launch it must leave to the plain kernel
    "tma-gqa-causal-tiles16-grad": case(
        70,
        70,
        4,
        2,
        causal=True,
        path="fixed",
        tiles=16,
        grad=True,
        seed=20,
        config={"tma": True},
    ),
    "tma-mqa-q<kv-causal-window-bf16-grad": case(
        40,
        100,
        4,
        1,
        "bfloat16",
        causal=True,
        window=(20, -1),
        path="fixed",
        tiles=16,
        grad=True,
        seed=21,
        config={"tma": True},
    ),
    "tma-no-key-rows-grad": case(
        60,
        20,
        2,
        2,
        window=(3, 0),
        path="fixed",
        tiles=16,
        grad=True,
        seed=22,
        config={"tma": True},
    ),
    "tma-window-skips-tiles-poisoned": case(
        16,
        256,
        2,
        1,
        causal=True,
        window=(15, -1),
        path="fixed",
        tiles=16,
        poison=192,
        seed=23,
        config={"tma": True},
    ),
    "tma-warp-spec-q>kv-causal": case(
        100,
        40,
        4,
        1,
        causal=True,
        path="fixed",
        tiles=16,
        seed=24,
        config={"tma": True, "warp_specialize": True},
    ),
    "tma-full-ragged-kv-bf16": case(  # no causal bound: only the key-range mask hides
        90, 30, 2, 2, "bfloat16", path="fixed", tiles=16, seed=26, config={"tma": True}
    ),  # the zero-filled rows past kv_len (30 = 16 + 14)
    # issue 44's TMA backward kernels (flash_bwd_tma.py), asked for by the backward's tiles: GQA
    # summed over a group, q_len < kv_len with a window, rows that see no key, ragged keys
    "bwd-tma-gqa-causal-grad": case(
        70,
        70,
        4,
        2,
        causal=True,
        path="fixed",
        tiles=16,
        grad=True,
        seed=30,
        config={"bwd_tma": [[16, 32], [32, 16]]},
    ),
    "bwd-tma-mqa-q<kv-causal-window-bf16-grad": case(
        40,
        100,
        4,
        1,
        "bfloat16",
        causal=True,
        window=(20, -1),
        path="fixed",
        tiles=16,
        grad=True,
        seed=31,
        config={"bwd_tma": [[16, 32], [32, 16]]},
    ),
    "bwd-tma-no-key-rows-grad": case(
        60,
        20,
        2,
        2,
        window=(3, 0),
        path="fixed",
        tiles=16,
        grad=True,
        seed=32,
        config={"bwd_tma": [[16, 16], [16, 16]]},
    ),
    "bwd-tma-full-ragged-kv-bf16-grad": case(  # 30 keys in one 32-key tile: 2 rows past
        90,
        30,
        2,
        2,
        "bfloat16",
        path="fixed",
        tiles=16,
        grad=True,
        seed=33,
        config={"bwd_tma": [[16, 32], [32, 16]]},
    ),
    "short-d128-stays-plain": case(  # flash_attn_func's own route below TMA_MIN_SEQLEN
        40, 40, 2, 1, "bfloat16", causal=True, D=128, seed=27
    ),
    "tma-asked-packed-gqa-stays-plain": case(
        70,
        70,
        4,
        2,
        causal=True,
        path="fixed",
        tiles=16,
        seed=25,
        config={"tma": True, "pack_gqa": True},
    ),
    "decode-q1-kv300-split3-fp16": case(1, 300, 4, 2, path="decode", splits=3, seed=11),
    "decode-q1-kv300-split3-bf16": case(1, 300, 4, 1, "bfloat16", path="decode", splits=3, seed=12),
    "decode-q16-kv300-causal-split3-bf16": case(
        16, 300, 4, 2, "bfloat16", causal=True, path="decode", splits=3, seed=13
    ),
    "decode-q16-causal-window-poisoned": case(
        16,
        300,
        2,
        1,
        causal=True,
        window=(40, -1),
        path="decode",
        splits=3,
        poison=128,
        seed=14,
    ),
    "decode-chosen-by-flash_attn_func": case(1, 1100, 4, 2, causal=True, seed=15),
    "decode-shape-with-grad-takes-autograd": case(
        1, 1100, 2, 1, causal=True, D=32, grad=True, seed=16
    ),
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    return run_interpreted(CASES, CHILD)


def check(name: str, spec: dict[str, Any], res: dict[str, Any]) -> None:
    tol = TOL[spec["dtype"]]
    assert res["meta"] and res["finite"], f"{name}: shape/dtype or NaN in the output"
    assert res["out"] < tol, f"{name}: output error {res['out']:.2e}"
    assert res["empty rows zero"], f"{name}: a row that sees no key is not 0"
    for grad in ("dq", "dk", "dv") if spec["grad"] else ():
        assert res[f"{grad} meta"], f"{name}: {grad} shape or dtype"
        assert res[grad] < tol, f"{name}: {grad} error {res[grad]:.2e}"


@pytest.mark.parametrize("name", list(CASES))
def test_interpreter_matches_float64(name: str, results: dict[str, dict[str, Any]]) -> None:
    check(name, CASES[name], results[name])


def test_cases_reach_what_they_name(results: dict[str, dict[str, Any]]) -> None:
    """Guards on the case list itself: the empty-row case has empty rows, the decode path is
    taken where a short query meets a long cache, and not when the call needs a backward."""
    assert results["no-key-rows-grad"]["empty rows"] == 40
    assert results["q>kv-causal-grad"]["empty rows"] == 60
    assert results["decode-chosen-by-flash_attn_func"]["decode calls"] == 1
    assert results["decode-shape-with-grad-takes-autograd"]["decode calls"] == 0
    assert results["gqa-H4-KV2-causal-fp16-grad"]["decode calls"] == 0
    for name in [n for n in CASES if n.startswith("tma-")]:  # the TMA kernel ran (or not)
        want = 0 if name == "tma-asked-packed-gqa-stays-plain" else 1
        assert results[name]["tma calls"] == want, name
    assert results["tma-warp-spec-q>kv-causal"]["empty rows"] == 60
    assert results["gqa-plain-causal-tiles16-grad"]["tma calls"] == 0  # off below head_dim 128
    assert results["short-d128-stays-plain"]["tma calls"] == 0
    for name in CASES:  # the TMA backward kernels ran where their tiles asked, only there
        asked = name.startswith("bwd-tma-")
        assert results[name]["dkdv tma calls"] == results[name]["dq tma calls"] == asked, name
        assert results[name]["atomic dq calls"] == 0, name  # the two-pass backward's cases


def test_tma_eligible_only_where_tma_can_address(mod: types.ModuleType) -> None:
    """flash_tma.eligible: contiguous [B, S, H, D] with D <= 128 qualifies; a strided last
    dimension, a base off 16 bytes, a row stride off 16 bytes or D 256 do not."""
    eligible = mod.flash_tma.eligible
    x = torch.zeros(2, 8, 3, 64, dtype=torch.float16)
    assert eligible(x, x, x)
    assert not eligible(x, x.transpose(1, 3).contiguous().transpose(1, 3), x)  # D stride 24
    flat = torch.zeros(2 * 8 * 3 * 64 + 1, dtype=torch.float16)
    assert not eligible(flat[1:].view(2, 8, 3, 64))  # base 2 bytes off
    assert not eligible(torch.zeros(2, 8, 3, 68, dtype=torch.float16)[..., :64])  # 136 B rows
    assert not eligible(torch.zeros(1, 4, 1, 256, dtype=torch.float16))


# ---------------------------------------------------------------------------------------
# CPU: plans, refusals, validation (no kernel runs)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mod() -> types.ModuleType:
    if not HAS_TRITON:
        pytest.skip("triton is not importable")
    return load_by_path()


def test_decode_refuses_inputs_that_require_grad(mod: types.ModuleType) -> None:
    q = torch.randn(1, 1, 4, 64, dtype=torch.float16, requires_grad=True)
    k = torch.randn(1, 300, 2, 64, dtype=torch.float16)
    with pytest.raises(NotImplementedError, match=r"^the Triton backward does not support"):
        mod.flash_attn_decode(q, k, k)


def test_decode_plan_follows_sms_and_parallelism(mod: types.ModuleType) -> None:
    """The H200 decode preset (B16 KV8, kv 8192) gets 8 chunks of 1024 keys (1024 programs,
    8 per SM); one sequence gets more, a window's span fewer; short caches take none."""
    dec, common = mod.flash_decode, mod.flash_common
    q = torch.empty(16, 1, 32, 128, dtype=torch.bfloat16)
    k = torch.empty(16, 8192, 8, 128, dtype=torch.bfloat16)
    full = common.resolve_window((-1, -1), True, 1, 8192)
    plan = dec.plan_decode(q, k, full, None)
    assert (plan.num_splits, plan.chunk, plan.block_m, plan.row_tiles) == (8, 1024, 16, 1)
    assert dec.plan_decode(q[:1], k[:1], full, None).num_splits == 16  # 8192 / 512
    window = common.resolve_window((1023, -1), True, 1, 8192)
    plan = dec.plan_decode(q[:1], k[:1], window, None)
    assert plan.kv_lo == 7168 and plan.num_splits == 2  # only the 1024 keys the row sees
    assert dec.use_decode_path(q, k, True, (-1, -1))
    assert not dec.use_decode_path(q, k[:, :512], True, (-1, -1))
    assert not dec.use_decode_path(torch.empty(16, 65, 32, 128), k, True, (-1, -1))


@pytest.mark.parametrize(
    "window, match", [((-2, 0), "window_size"), ((1.5, 0), "window_size"), ((3,), "window_size")]
)
def test_rejects_bad_windows(mod: types.ModuleType, window: Any, match: str) -> None:
    q = torch.randn(1, 8, 2, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=match):
        mod.flash_attn_func(q, q, q, window_size=window)


def test_rejects_heads_not_divisible_by_kv_heads(mod: types.ModuleType) -> None:
    q = torch.randn(1, 8, 4, 64, dtype=torch.float16)
    k = torch.randn(1, 8, 3, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="kv_heads"):
        mod.flash_attn_func(q, k, k)


# ---------------------------------------------------------------------------------------
# GPU: the app's presets
# ---------------------------------------------------------------------------------------

PRESETS = {  # name: (B, q_len, kv_len, H, KVH, causal, window)
    "LLM prefill: B4 H32/KV8 S4096 D128 bf16 causal": (4, 4096, 4096, 32, 8, True, (-1, -1)),
    "LLM decode: B16 H32/KV8, q_len 1 vs kv_len 8192, D128 bf16": (
        16,
        1,
        8192,
        32,
        8,
        True,
        (-1, -1),
    ),
    "sliding window 1024": (4, 4096, 4096, 32, 8, True, (1023, 0)),
}


def sdpa_attention(q: Any, k: Any, v: Any, causal: bool, window: tuple[int, int]) -> Any:
    """SDPA with enable_gqa and an explicit bottom-right mask (causal_lower_right's rule)."""
    mask = visible_keys(q.shape[1], k.shape[1], causal, window, q.device)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)
    return out.transpose(1, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("preset", list(PRESETS))
def test_gpu_presets_match_float64_and_sdpa(preset: str) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    mod = load_by_path()
    b, sq, sk, h, kvh, causal, window = PRESETS[preset]
    torch.manual_seed(sq + sk)
    q = torch.randn(b, sq, h, 128, dtype=torch.bfloat16, device="cuda")
    k, v = (torch.randn(b, sk, kvh, 128, dtype=torch.bfloat16, device="cuda") for _ in "kv")
    out = mod.flash_attn_func(q, k, v, causal=causal, window_size=window)
    assert out.shape == q.shape and bool(out.isfinite().all())
    # float64 on batch 0 and the first two K/V heads' query groups (GQA structure kept).
    g = h // kvh
    ref = reference_attention(q[:1, :, : 2 * g], k[:1, :, :2], v[:1, :, :2], causal, window)
    assert rel_err(out[:1, :, : 2 * g], ref) < 1e-2
    theirs = sdpa_attention(q, k, v, causal, window)
    assert rel_err(out, theirs.double()) < 2e-2
    if sq == 1:  # the decode preset takes the split-KV kernels
        assert mod.flash_decode.use_decode_path(q, k, causal, window)


@pytest.mark.gpu
def test_gpu_gqa_window_backward_matches_float64() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    mod = load_by_path()
    spec = case(1000, 1200, 8, 2, "bfloat16", causal=True, window=(300, -1), B=2, D=128, grad=True)
    res = run_case(mod, spec, device="cuda")
    check("gpu gqa window backward", spec, res)


def test_the_tutorial_tile_is_tried_by_the_tma_autotuner_only(mod: types.ModuleType) -> None:
    """(128, 64, 4 warps, 2 stages): the TMA kernel's best at head_dim 128 on an H100, a 4x
    spill for the pointer kernel; kept in flash_tma's list at head_dim <= 128 only."""
    config = mod.flash_fwd_config
    tma_configs = mod.flash_tma._make_tma_configs()

    def tiles(kept: list) -> set:
        return {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in kept}

    args = {"HEAD_DIM": 128, "seqlen_q": 4096}
    assert config.TMA_ONLY_TILE in tiles(config._prune_tma_configs(tma_configs, args))
    assert config.TMA_ONLY_TILE not in tiles(config._prune_configs(tma_configs, args))
    assert config.TMA_ONLY_TILE not in tiles(config._prune_configs(config._make_configs(), args))
    wide = {"HEAD_DIM": 256, "seqlen_q": 4096}
    assert config.TMA_ONLY_TILE not in tiles(config._prune_tma_configs(tma_configs, wide))


def test_the_default_route_takes_tma_where_it_won_on_the_gpu(mod: types.ModuleType) -> None:
    """head_dim 128, no window, q_len >= 4096 (H100: -7% MHA, -6% GQA); a 512 window (+12%),
    q_len 1024 and head_dim 64 stay on the pointer kernel; TMA_FORWARD or a fixed launch's
    tma still decide alone."""
    fwd = mod.flash_fwd

    def takes(S: int, D: int, windowed: bool = False, **meta: object) -> bool:
        x = torch.zeros(1, S, 1, D, dtype=torch.bfloat16)
        return fwd._takes_tma({"OVERLAP": False, "PACK_GQA": False, **meta}, x, x, x, windowed)

    assert takes(4096, 128)
    assert takes(8192, 128)
    assert not takes(4096, 128, windowed=True)
    assert not takes(2048, 128)
    assert not takes(4096, 64)
    assert not takes(4096, 128, TMA=False)
    assert takes(1024, 64, TMA=True)
