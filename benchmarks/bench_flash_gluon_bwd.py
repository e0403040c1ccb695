"""Issue 44, step 15: the warp-specialised Gluon dK/dV kernel (flash_gluon_bwd.py) on an H100.

    PYTHONUNBUFFERED=1 OUT=DIR python3 benchmarks/bench_flash_gluon_bwd.py [--rounds 5]

(a) Correct first: at small ragged shapes (causal and not, q_len < and > kv_len, rows that
see no key, D64, fp16, a 1,000-row one), the backward with the dK/dV pass on the Gluon
kernel against the same backward on the Triton kernel and against float64 autograd
(‖g − ref‖ / ‖ref‖); each case counts that the Gluon launch ran. Exit 1 if any gradient is
off (TOL) or no case ran. (b) Timed, rows interleaved (bench_flash_triton_ab.time_rows,
do_bench medians, L2 flushed): at B4 H16 S4096 D128 bf16 causal the train step (forward +
backward through flash_attn_func) with each dK/dV kernel and cuDNN's, the backward alone,
and the dK/dV pass alone; the Gluon kernel at 2 and 3 ring stages. JSON and a table to $OUT.
`--shapes`: the backward alone at other shapes (SHAPES), Triton's dK/dV pass against Gluon's,
to say where the route should take it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.bench_flash_triton_ab import (  # noqa: E402
    WORKLOADS,
    cudnn,
    impl,
    markdown,
    rel,
    time_rows,
)
from benchmarks.bench_flash_triton_shapes import load  # noqa: E402

TRAIN = "train B4 H16 S4096 D128"
TOL = 1e-2  # relative gradient error, bf16/fp16 inputs (the Triton kernel's is ~3e-3)
# (batch, heads, q_len, kv_len, head_dim, causal, dtype)
CASES = [
    (2, 4, 300, 300, 128, True, torch.bfloat16),
    (2, 4, 100, 300, 128, True, torch.bfloat16),
    (2, 4, 300, 100, 128, True, torch.bfloat16),
    (2, 4, 300, 300, 128, False, torch.bfloat16),
    (2, 4, 200, 333, 128, False, torch.bfloat16),
    (1, 4, 1000, 1000, 128, True, torch.float16),
    (2, 4, 256, 256, 64, True, torch.bfloat16),
    (1, 2, 2048, 2048, 128, True, torch.bfloat16),
]
VARIANTS = {"Triton dK/dV": (False, 2), "Gluon dK/dV s2": (True, 2), "Gluon dK/dV s3": (True, 3)}


def reference_grads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor,
                    causal: bool) -> list[torch.Tensor]:  # fmt: skip
    """dQ, dK, dV of float64 attention (the tests' reference: a row that sees no key gives 0)."""
    from tests.attention.test_flash_triton_shapes import reference_attention

    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    reference_attention(*leaves, causal, (-1, -1)).backward(dout.double())
    return [t.grad for t in leaves]


def set_variant(fa: Any, gluon: bool, stages: int) -> None:
    fa.flash_bwd.GLUON_WS_DKDV = gluon
    fa.flash_bwd.GLUON_WS_DKDV_STAGES = stages


def correctness(fa: Any) -> tuple[bool, list[dict[str, Any]]]:
    """Every case's gradients on both dK/dV kernels, against float64 and each other."""
    from tests.attention.test_flash_triton import launched

    ok, found = True, []
    for case in CASES:
        batch, heads, sq, sk, d, causal, dtype = case
        gen = torch.Generator(device="cuda").manual_seed(sq * 7 + sk + d)
        q, k, v, dout = (
            torch.randn(batch, n, heads, d, device="cuda", dtype=dtype, generator=gen)
            for n in (sq, sk, sk, sq)
        )
        ref = reference_grads(q, k, v, dout, causal)
        grads = {}
        for gluon in (False, True):
            set_variant(fa, gluon, 2)
            with launched(fa.flash_gluon_bwd, "_flash_bwd_dkdv_ws_kernel") as launches:
                leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                fa.flash_attn_func(*leaves, causal=causal).backward(dout)
            grads[gluon] = [t.grad for t in leaves]
            if gluon and not launches:
                ok = False
                print(f"{case}: the Gluon kernel did not run", flush=True)
        row = {"case": str(case)}
        for name, i in (("dq", 0), ("dk", 1), ("dv", 2)):
            row[f"{name} Triton vs f64"] = rel(grads[False][i], ref[i])
            row[f"{name} Gluon vs f64"] = rel(grads[True][i], ref[i])
            row[f"{name} Gluon vs Triton"] = rel(grads[True][i], grads[False][i])
            ok &= row[f"{name} Gluon vs f64"] <= TOL
        found.append(row)
        print(json.dumps(row), flush=True)
    return ok and bool(found), found


def dkdv_alone(fa: Any) -> Callable:
    """A builder of the dK/dV pass alone at the train shape (the variant's kernel)."""
    shape = WORKLOADS[TRAIN]

    def make() -> Callable:
        from benchmarks.bench_flash_triton_ab import inputs

        q, k, v = inputs(shape)
        out, lse = fa.flash_fwd._launch(q, k, v, None, True, None, return_lse=True)
        dout = torch.randn_like(q)
        delta = (out.float() * dout.float()).sum(-1).transpose(1, 2).contiguous()
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        config = fa.default_backward_config(128, fa.flash_bwd_config.BACKWARD_L2_GROUP)
        window = fa.flash_common.resolve_window((-1, -1), True, q.shape[1], k.shape[1])
        shapes = (q.shape[1], k.shape[1], q.shape[2], 1, window.lo_diag, window.hi_diag)
        meta = {"HEAD_DIM": 128, "CAUSAL": True, "UPCAST_DOT": False, "WINDOW": False}
        tensors = (q, k, v, dout, lse, delta, dk, dv)
        return lambda: fa.flash_bwd._launch_dkdv(tensors, None, 128**-0.5, shapes,
                                                 config.dkdv, meta)  # fmt: skip

    return make


def bwd_alone(fa: Any, shape: tuple = WORKLOADS[TRAIN], causal: bool = True) -> Callable:
    """A builder of the whole backward alone (delta, dK/dV, dQ) at a shape."""

    def make() -> Callable:
        from benchmarks.bench_flash_triton_ab import inputs

        q, k, v = inputs(shape)
        out, lse = fa.flash_fwd._launch(q, k, v, None, causal, None, return_lse=True)
        dout, scale = torch.randn_like(q), q.shape[-1] ** -0.5
        return lambda: fa.flash_attn_backward(dout, q, k, v, out, lse, scale, causal)

    return make


# --shapes: where else the route could send the backward (B, H, KVH, Sq, Sk, D, window, mode)
SHAPES = {
    "bwd B4 H16 S4096 D128 non-causal": ((4, 16, 16, 4096, 4096, 128, (-1, -1), "train"), False),
    "bwd B8 H16 S1024 D128 causal": ((8, 16, 16, 1024, 1024, 128, (-1, -1), "train"), True),
    "bwd B8 H16 S1024 D64 causal": ((8, 16, 16, 1024, 1024, 64, (-1, -1), "train"), True),
    "bwd B4 H16 S4096 D64 causal": ((4, 16, 16, 4096, 4096, 64, (-1, -1), "train"), True),
    "bwd B2 H16 S8192 D128 causal": ((2, 16, 16, 8192, 8192, 128, (-1, -1), "train"), True),
    "bwd B16 H16 S512 D128 causal": ((16, 16, 16, 512, 512, 128, (-1, -1), "train"), True),
}


def shape_rows(fa: Any) -> list[tuple[str, str, Callable, Callable]]:
    """The backward alone at SHAPES, the Triton dK/dV pass against the Gluon one (3 stages)."""
    listed = []
    for name, (shape, causal) in SHAPES.items():
        for label, (gluon, stages) in (("Triton dK/dV", (False, 3)), ("Gluon dK/dV s3", (True, 3))):
            setup = lambda g=gluon, s=stages: set_variant(fa, g, s)  # noqa: E731
            listed.append((name, label, setup, bwd_alone(fa, shape, causal)))
    return listed


def rows(fa: Any) -> list[tuple[str, str, Callable, Callable]]:
    """(workload, label, setup, builder) of every timed row."""
    listed = []
    for label, (gluon, stages) in VARIANTS.items():
        setup = lambda g=gluon, s=stages: set_variant(fa, g, s)  # noqa: E731
        listed.append((TRAIN, label, setup, lambda: impl(fa, WORKLOADS[TRAIN])))
        listed.append(("backward alone", label, setup, bwd_alone(fa)))
        listed.append(("dK/dV pass alone", label, setup, dkdv_alone(fa)))
    off = lambda: set_variant(fa, False, 2)  # noqa: E731
    listed.append((TRAIN, "cuDNN", off, lambda: cudnn(WORKLOADS[TRAIN])))
    return listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--shapes", action="store_true", help="time SHAPES' backwards only")
    args = parser.parse_args()
    t0 = time.perf_counter()
    fa = load(REPO / "attention" / "flash_triton" / "build" / "torch-universal", "_fa_gbwd")
    print(f"Gluon dK/dV available: {fa.flash_gluon_bwd.available()} "
          f"(missing: {fa.flash_gluon_bwd._MISSING})", flush=True)  # fmt: skip
    ok, checks = (True, []) if args.shapes else correctness(fa)
    print(f"correctness: {'PASS' if ok else 'FAIL'}", flush=True)
    chosen = shape_rows(fa) if args.shapes else rows(fa)
    timed = [] if args.skip_timing or not ok else time_rows({"new": fa}, args.rounds, chosen=chosen)
    table = markdown(timed) if timed else ""
    print(table, flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "ok": ok,
              "checks": checks, "rows": timed, "seconds": time.perf_counter() - t0}  # fmt: skip
    if os.environ.get("OUT"):
        out = pathlib.Path(os.environ["OUT"])
        out.mkdir(parents=True, exist_ok=True)
        stem = "gluon_bwd_shapes" if args.shapes else "gluon_bwd"
        (out / f"{stem}.json").write_text(json.dumps(result, indent=1))
        (out / f"{stem}.md").write_text(table + "\n")
    print(f"{result['device']}; done in {result['seconds']:.0f} s", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
