"""The Gluon forwards (flash_gluon.py, flash_gluon_ws.py) on an H100: correct, then timed.

    PYTHONPATH=$PWD python3 benchmarks/bench_flash_gluon.py --out DIR [--rounds 5]

(a) Every config against float64 attention (softmax(q kᵀ * scale + bottom-right causal
mask) v, and its natural-log LSE) at small ragged shapes, GQA, q_len < kv_len and q_len >
kv_len (rows that see no key: out 0, LSE +inf), D128 and D64, bf16 and fp16. Exit code 1 if
any max abs error is above TOL, or if no config compiles. (b) do_bench medians (L2 flushed),
rounds interleaved, at B4 H16 S4096 D128 causal, the GQA prefill B4 H32/KV8 causal and B4
H16 non-causal: cuDNN (SDPA), our shipped forward (flash_attn_func), the Gluon configs and
the warp-specialised Gluon configs (`ws ...`, flash_gluon_ws.py: producer warp + two consumer
warpgroups in ping-pong). A config that fails to compile or to run is reported and skipped.
JSON to DIR/flash_gluon.json.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import importlib
import json
import math
import pathlib
import statistics
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_flash_triton_shapes import bench, load  # noqa: E402

TOL = 2e-2  # max abs error, fp16/bf16 outputs of O(1)
# name -> gluon_forward keywords (block_m, block_n, num_warps, stages, l2_group)
CONFIGS = {
    "gluon BM128 BN128 w8 s2": {"block_n": 128, "stages": 2},
    "gluon BM128 BN64 w8 s2": {"block_n": 64, "stages": 2},
    "gluon BM128 BN64 w8 s3": {"block_n": 64, "stages": 3},
    "gluon BM128 BN128 w8 s2 L2g8": {"block_n": 128, "stages": 2, "l2_group": 8},
}
# name -> gluon_ws_forward keywords (block_n, stages, l2_group; block_m is 128: 2 x 64 rows)
WS_CONFIGS = {
    "ws BM128 BN128 s2 L2g16": {"block_n": 128, "stages": 2},
    "ws BM128 BN128 s3 L2g16": {"block_n": 128, "stages": 3},
    "ws BM128 BN64 s4 L2g16": {"block_n": 64, "stages": 4},
    "ws BM128 BN128 s2 L2g8": {"block_n": 128, "stages": 2, "l2_group": 8},
}
# (batch, heads, kv_heads, q_len, kv_len, head_dim, causal, dtype)
CASES = [
    (2, 4, 2, 300, 300, 128, True, torch.bfloat16),
    (2, 4, 2, 100, 300, 128, True, torch.bfloat16),
    (2, 4, 2, 300, 100, 128, True, torch.bfloat16),
    (2, 4, 2, 300, 300, 128, False, torch.bfloat16),
    (1, 4, 4, 1000, 1000, 128, True, torch.float16),
    (2, 4, 2, 300, 300, 64, True, torch.bfloat16),
    (2, 4, 1, 100, 300, 64, False, torch.bfloat16),
]
WORKLOADS = {  # name -> (batch, heads, kv_heads, seq, causal)
    "fwd B4 H16 S4096 D128 causal": (4, 16, 16, 4096, True),
    "GQA B4 H32/KV8 S4096 D128 causal": (4, 32, 8, 4096, True),
    "fwd B4 H16 S4096 D128 non-causal": (4, 16, 16, 4096, False),
}


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 (out [B, Sq, H, D], LSE [B*H, Sq]); rows that see no key: 0 and +inf."""
    group = q.shape[2] // k.shape[2]
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))  # (B, H, S, D)
    kd, vd = kd.repeat_interleave(group, 1), vd.repeat_interleave(group, 1)
    scores = qd @ kd.transpose(-1, -2) * scale
    sq, sk = q.shape[1], k.shape[1]
    if causal:  # query i sees keys j <= i + sk - sq
        rows = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        scores = scores.masked_fill(torch.arange(sk, device=q.device)[None, :] > rows, -math.inf)
    lse = torch.logsumexp(scores, -1)
    seen = torch.isfinite(lse)
    probs = torch.where(seen[..., None], torch.exp(scores - lse[..., None]), 0.0)
    lse = torch.where(seen, lse, math.inf)
    return (probs @ vd).transpose(1, 2), lse.reshape(-1, sq)


def check(forward: Callable[..., Any], case: tuple) -> tuple[float, float]:
    """(max abs error of out, of the finite LSE) of one case; +inf rows must match."""
    batch, heads, kv_heads, sq, sk, d, causal, dtype = case
    gen = torch.Generator(device="cuda").manual_seed(sq * 7 + sk + d)
    q = torch.randn(batch, sq, heads, d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(batch, sk, kv_heads, d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(batch, sk, kv_heads, d, device="cuda", dtype=dtype, generator=gen)
    scale = 1.0 / math.sqrt(d)
    out, lse = forward(q, k, v, scale, causal, return_lse=True)
    ref_out, ref_lse = reference(q, k, v, causal, scale)
    err = (out.double() - ref_out).abs().max().item()
    finite = torch.isfinite(ref_lse)
    if not torch.equal(finite, torch.isfinite(lse)):
        return err, math.inf  # a row that saw no key must say +inf (and only those)
    return err, (lse.double() - ref_lse)[finite].abs().max().item() if finite.any() else 0.0


def forwards(gluon: Any, ws: Any) -> dict[str, Callable[..., Any]]:
    """name -> forward(q, k, v, scale, causal, return_lse=...) of every config of both."""
    fns = {name: functools.partial(gluon.gluon_forward, **c) for name, c in CONFIGS.items()}
    for name, config in WS_CONFIGS.items():
        fns[name] = functools.partial(ws.gluon_ws_forward, **config)
    return fns


def correctness(fns: dict[str, Callable[..., Any]], results: dict) -> tuple[bool, list[str]]:
    """Every config at the D128 cases, each module's first also at D64; (all good, configs
    that ran)."""
    good, working = True, []
    with_d64 = {next(iter(CONFIGS)), next(iter(WS_CONFIGS))}
    for name, forward in fns.items():
        ok = True
        for case in CASES:
            if case[5] == 64 and name not in with_d64:
                continue
            label = f"{name} | B{case[0]} H{case[1]}/{case[2]} Sq{case[3]} Sk{case[4]} " + (
                f"D{case[5]} {'causal' if case[6] else 'full'} {str(case[7])[6:]}"
            )
            try:
                err, lse_err = check(forward, case)
            except Exception as e:  # a compile or launch failure of this config
                results["errors"][label] = traceback.format_exception_only(e)[-1].strip()[:400]
                print(f"{label}: FAILED {results['errors'][label]}", flush=True)
                ok = False
                break
            results["correctness"][label] = {"max_abs_out": err, "max_abs_lse": lse_err}
            bad = not err <= TOL or not lse_err <= TOL
            good &= not bad
            print(f"{label}: out {err:.2e}, lse {lse_err:.2e}{'  <-- FAIL' if bad else ''}")
        if ok:
            working.append(name)
    return good, working


def contenders(fa: Any, fns: dict, working: list[str], workload: tuple) -> dict:
    """name -> zero-argument callable for one workload (inputs made once)."""
    batch, heads, kv_heads, seq, causal = workload
    q = torch.randn(batch, seq, heads, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, seq, kv_heads, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, S, D] views for SDPA
    scale = 1.0 / math.sqrt(128)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def cudnn() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return sdpa(qt, kt, vt, is_causal=causal, scale=scale, enable_gqa=heads != kv_heads)

    calls = {
        "cuDNN": cudnn,
        "ours (flash_attn_func)": lambda: fa.flash_attn_func(q, k, v, scale, causal),
    }
    for name in working:
        calls[name] = lambda f=fns[name]: f(q, k, v, scale, causal)
    return calls


def timing(fa: Any, forwards: dict, working: list[str], rounds: int, results: dict) -> None:
    """Interleaved rounds of do_bench medians per workload; the median of rounds printed."""
    for wname, workload in WORKLOADS.items():
        fns = contenders(fa, forwards, working, workload)
        for name, fn in list(fns.items()):  # compile / autotune outside the timing
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as e:
                results["errors"][f"{wname} | {name}"] = str(e).splitlines()[-1][:400]
                print(f"{wname} | {name}: FAILED {e}", flush=True)
                del fns[name]
        per = {name: [] for name in fns}
        for r in range(rounds):
            for name, fn in fns.items():
                per[name].append(bench(fn))
            print(f"{wname} round {r}: " + ", ".join(f"{n} {t[-1]:.0f}" for n, t in per.items()))
        results["timing_us"][wname] = per
    print("\nmedian of rounds, µs (ratio = cuDNN time / this time; > 1 is faster than cuDNN)")
    for wname, per in results["timing_us"].items():
        base = statistics.median(per["cuDNN"]) if "cuDNN" in per else math.nan
        print(f"\n{wname}")
        for name, times in per.items():
            med = statistics.median(times)
            spread = f"rounds {min(times):.0f}-{max(times):.0f}"
            print(f"  {name:34s} {med:8.1f}  {base / med:5.2f}x  ({spread})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--watchdog-s", type=int, default=270, help="dump stacks and exit")
    args = parser.parse_args()
    import triton

    # a wrong mbarrier phase hangs the GPU forever: say where, and stop, instead
    faulthandler.dump_traceback_later(args.watchdog_s, exit=True)

    fa = load(REPO / "attention" / "flash_triton" / "build" / "torch-universal", "_fa_gluon")
    gluon = importlib.import_module("_fa_gluon.flash_gluon")
    ws = importlib.import_module("_fa_gluon.flash_gluon_ws")
    results: dict = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "triton": triton.__version__, "available": gluon.available(),
        "ws_available": ws.available(), "correctness": {}, "timing_us": {}, "errors": {},
        "tol": TOL,
    }  # fmt: skip
    print(f"{results['device']}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"flash_gluon.available() = {results['available']} (missing: {gluon._MISSING})")
    print(f"flash_gluon_ws.available() = {results['ws_available']} (missing: {ws._MISSING})")
    fns = forwards(gluon, ws)
    good, working = correctness(fns, results)
    results["correct"], results["working_configs"] = good, working
    timing(fa, fns, working, args.rounds, results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "flash_gluon.json").write_text(json.dumps(results, indent=1))
    print(f"\ncorrect: {good}; configs that ran: {working}; wrote {args.out / 'flash_gluon.json'}")
    if not good or not working:
        sys.exit(1)


if __name__ == "__main__":
    main()
