"""Time the Triton FlashAttention backward against SDPA's flash and cuDNN backwards (CUDA only).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 benchmarks/bench_flash_triton_bwd.py
Not a test. Backward only: each forward runs outside the timed region, then
`out.backward(dout, retain_graph=True)` is timed with CUDA events (median over many repeats,
input grads reset to None before each so no accumulation kernel runs). Inputs are in each
implementation's own layout: [B, S, H, D] for ours, [B, H, S, D] (contiguous) for SDPA.
Prints markdown tables; when OUT is set, also writes bench_flash_triton_bwd.{json,md} there.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from bench_flash_triton import fmt_table, load_kernel  # run as a script: benchmarks/ on the path
from torch.nn.attention import SDPBackend, sdpa_kernel

FLOP_NOTE = (
    "FLOPs: forward = 4*B*H*S^2*D (causal: half), backward = 2.5 x forward. "
    "TFLOP/s = backward FLOPs / median backward time."
)
IMPLS = ("ours", "flash", "cudnn")
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def backward_flops(b: int, h: int, s: int, d: int, causal: bool) -> float:
    forward = 4.0 * b * h * s * s * d
    return 2.5 * (forward / 2 if causal else forward)


def median_us(fn: Callable[[], Any], before: Callable[[], Any], budget_s: float = 0.4) -> float:
    """Median CUDA-event time of fn() in µs; before() runs untimed ahead of each call."""
    for _ in range(3):  # warm-up (and a first estimate of the time)
        before()
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    before()
    fn()
    torch.cuda.synchronize()
    reps = int(min(100, max(10, budget_s / max(time.perf_counter() - t0, 1e-6))))
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for start, end in events:
        before()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events) * 1e3


class Backward:
    """One implementation's forward, done once, and its backward as a timed callable."""

    def __init__(self, leaves: list[torch.Tensor], out: torch.Tensor, dout: torch.Tensor):
        self.leaves, self.out, self.dout = leaves, out, dout

    def reset(self) -> None:
        for x in self.leaves:
            x.grad = None

    def run(self) -> None:
        self.out.backward(self.dout, retain_graph=True)

    def grads(self, to_bshd: bool) -> list[torch.Tensor]:
        self.reset()
        self.run()
        return [x.grad.transpose(1, 2) if to_bshd else x.grad for x in self.leaves]


def build(
    fa: types.ModuleType, impl: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    dout: torch.Tensor, causal: bool, **config: Any,
) -> Backward:  # fmt: skip
    """Leaves in the implementation's layout, its forward (outside any timing), the backward."""
    if impl == "ours":
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        if config:
            out = fa.flash_attn_func_with_config(*leaves, causal=causal, **config)
        else:
            out = fa.flash_attn_func(q=leaves[0], k=leaves[1], v=leaves[2], causal=causal)
        return Backward(leaves, out, dout)
    leaves = [x.detach().transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel(BACKENDS[impl]):
        out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    return Backward(leaves, out, dout.transpose(1, 2).contiguous())


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item()


def inputs(b: int, s: int, h: int, d: int, seed: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    return [torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4)]


def measure_shape(fa: types.ModuleType, b: int, h: int, s: int, d: int) -> dict[str, Any]:
    """Backward µs and TFLOP/s of the three at one causal bf16 shape, plus our error vs flash."""
    q, k, v, dout = inputs(b, s, h, d, seed=s + d)
    row: dict[str, Any] = {"B": b, "H": h, "S": s, "D": d}
    flops = backward_flops(b, h, s, d, True)
    grads = {}
    for impl in IMPLS:
        try:
            bwd = build(fa, impl, q, k, v, dout, True)
            grads[impl] = bwd.grads(to_bshd=impl != "ours")
            us = median_us(bwd.run, bwd.reset)
        except RuntimeError as e:  # a backend that refuses this shape/build: say so, go on
            row[f"{impl} error"] = str(e).splitlines()[0][:200]
            continue
        row[f"{impl} us"] = us
        row[f"{impl} TFLOP/s"] = flops / (us * 1e-6) / 1e12
        del bwd
    if "ours" in grads and "flash" in grads:
        pairs = zip(grads["ours"], grads["flash"], strict=True)
        row["ours vs flash err"] = max(rel_err(a, ref) for a, ref in pairs)
    flash = row.get("flash us")
    row["ours/flash time"] = row["ours us"] / flash if flash and "ours us" in row else float("nan")
    row["forward config"] = fa.last_autotune_choice()
    return row


# Backward tiles tried at the target shape: (block_m, block_n, warps, stages). Kept to those an
# offline sm_90 compile (Triton 3.9) showed spilling no or few registers at head_dim 128.
DKDV_CANDIDATES = [(32, 128, 8, 2), (32, 128, 8, 3), (16, 128, 8, 3), (16, 64, 4, 3),
                   (32, 64, 4, 3), (64, 128, 8, 2)]  # fmt: skip
DQ_CANDIDATES = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 32, 8, 3), (128, 32, 8, 4),
                 (64, 32, 4, 3), (64, 64, 4, 3)]  # fmt: skip


def survey(fa: types.ModuleType, b: int, h: int, s: int, d: int) -> list[dict[str, Any]]:
    """Each kernel's candidates timed alone (with the small delta kernel), the other kernel
    left out; gradients checked against SDPA flash's."""
    q, k, v, dout = inputs(b, s, h, d, seed=1)
    ref = build(fa, "flash", q, k, v, dout, True).grads(to_bshd=True)
    out, lse = fa.flash_fwd._launch(q, k, v, None, True, None, return_lse=True)
    default = fa.default_backward_config(d)
    rows = []
    for kernel, candidates in (("dkdv", DKDV_CANDIDATES), ("dq", DQ_CANDIDATES)):
        needs = (False, True, True) if kernel == "dkdv" else (True, False, False)
        for tiles in candidates:
            tile = fa.TileConfig(*tiles)
            config = fa.BackwardConfig(
                tile if kernel == "dkdv" else default.dkdv, tile if kernel == "dq" else default.dq
            )

            def call(config: Any = config, needs: tuple = needs) -> tuple:
                return fa.flash_attn_backward(
                    dout, q, k, v, out, lse, q.shape[-1] ** -0.5, True, config=config, needs=needs
                )

            row: dict[str, Any] = {"kernel": kernel, "config": tile.short()}
            row["default"] = tile == getattr(default, kernel)
            try:
                got = call()
                pairs = [(g, r) for g, r, n in zip(got, ref, needs, strict=True) if n]
                row["err vs flash"] = max(rel_err(g, r) for g, r in pairs)
                row["us"] = median_us(call, lambda: None)
            except Exception as e:  # a survey: report the failure, go on
                row["error"] = f"{type(e).__name__}: {e}"[:200]
            rows.append(row)
            print("  survey", row, flush=True)
    return rows


def inference_cost(fa: types.ModuleType, b: int, h: int, s: int, d: int) -> list[dict]:
    """What the LSE costs the forward, and what the no-grad path costs compared to before."""
    q, k, v, _ = inputs(b, s, h, d, seed=2)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    fixed = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}
    launch = fa.flash_fwd._launch
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("flash_attn_func, no grad (inference, autotuned)",
         lambda: fa.flash_attn_func(q, k, v, causal=True)),
        ("flash_attn_func, inputs require grad (training forward, autotuned)",
         lambda: fa.flash_attn_func(*leaves, causal=True)),
        ("_launch BM128 BN128 w8 s3, no LSE (the kernel as before)",
         lambda: launch(q, k, v, None, True, fixed)),
        ("_launch BM128 BN128 w8 s3, with LSE", lambda: launch(q, k, v, None, True, fixed, True)),
    ]  # fmt: skip
    rows = [{"forward": name, "us": median_us(fn, lambda: None)} for name, fn in cases]
    small = [x[:1, :128, :1].contiguous() for x in (q, k, v)]  # host cost: a launch-bound call
    for name, fn in (
        ("host us per call at B1 S128 H1: flash_attn_func", lambda: fa.flash_attn_func(*small)),
        ("host us per call at B1 S128 H1: _launch (no wrapper)",
         lambda: launch(*small, None, False, None)),
    ):  # fmt: skip
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(500):
            fn()
        torch.cuda.synchronize()
        rows.append({"forward": name, "us": (time.perf_counter() - t0) / 500 * 1e6})
    return rows


def write_outputs(text: str, payload: dict[str, Any]) -> None:
    out_dir = os.environ.get("OUT")
    if out_dir:
        p = pathlib.Path(out_dir)
        (p / "bench_flash_triton_bwd.md").write_text(text + "\n")
        (p / "bench_flash_triton_bwd.json").write_text(json.dumps(payload, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--no-survey", action="store_true", help="skip the tile survey")
    args = parser.parse_args()
    command = "python3 benchmarks/bench_flash_triton_bwd.py " + " ".join(sys.argv[1:])
    print(f"command: {command.strip()}")
    if not torch.cuda.is_available():
        sys.exit("bench_flash_triton_bwd.py needs a CUDA GPU")
    import triton

    started = time.time()
    fa, how = load_kernel()
    dev = torch.cuda.get_device_name()
    print(f"device {dev}; torch {torch.__version__}; triton {triton.__version__}; loaded via {how}")
    print(FLOP_NOTE)
    print(f"backward defaults at D128: {fa.default_backward_config(128).short()}")
    b, h, d = args.batch, 16, 128
    tiles = [] if args.no_survey else survey(fa, b, h, 4096, d)
    rows = []
    for s in (int(x) for x in args.seqs.split(",")):
        rows.append(measure_shape(fa, b, h, s, d))
        print(" ", rows[-1], flush=True)
        torch.cuda.empty_cache()
    costs = inference_cost(fa, b, h, 4096, d)
    cols = ["S", *(f"{i} us" for i in IMPLS), *(f"{i} TFLOP/s" for i in IMPLS)]
    md = [
        f"command: `{command.strip()}`", "",
        f"# Triton FlashAttention backward vs SDPA on {dev}", "", FLOP_NOTE, "",
        f"## Backward only, B={b} H={h} D={d} bf16 causal "
        f"(ours: {fa.default_backward_config(d).short()})", "",
        fmt_table(rows, [*cols, "ours/flash time", "ours vs flash err", "forward config"]), "",
        "## Forward: what the LSE and the wrapper cost (S=4096)", "",
        fmt_table(costs, ["forward", "us"]), "",
    ]  # fmt: skip
    if tiles:
        md += ["## Tile survey at S=4096 (each kernel alone, + delta)", ""]
        md += [fmt_table(tiles, ["kernel", "config", "default", "us", "err vs flash", "error"])]
    md += ["", f"torch {torch.__version__}, triton {triton.__version__}; "
           f"whole run {time.time() - started:.0f} s."]  # fmt: skip
    text = "\n".join(md)
    print()
    print(text)
    write_outputs(text, {"device": dev, "rows": rows, "survey": tiles, "forward": costs})


if __name__ == "__main__":
    main()
