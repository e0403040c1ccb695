"""Issue 44's A/B: the Triton FlashAttention before and after, its candidate steps, and cuDNN.

Run from the repository root on a GPU machine (CUDA only; not a test):
    PYTHONUNBUFFERED=1 python3 benchmarks/bench_flash_triton_ab.py --baseline DIR
DIR holds a copy of attention/flash_triton from before the change (DIR/build/torch-universal,
e.g. `git archive <commit> attention/flash_triton | tar -x -C DIR --strip-components=2`).
Writes ab.json and ab.md under $OUT when OUT is set.

1. Warm-up: worker processes compile every kernel the timings need (Triton's disk cache), so
   the main process times kernels, not compiles; one worker measures the first call of the new
   code at the target shapes against an empty cache (the page's first click).
2. Correctness of every candidate against float64 (outputs and gradients, small shapes) and,
   at the benchmark shapes, against cuDNN.
3. Timings: `triton.testing.do_bench` medians (L2 flushed), interleaved in rounds; decode and
   the short forward also replayed from a CUDA graph (their eager time is host-bound).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.bench_flash_triton_shapes import load  # noqa: E402

BF16 = torch.bfloat16
# name: (B, H, KV heads, q_len, kv_len, D, window, mode); all causal, bf16.
WORKLOADS = {
    "fwd B8 H16 S1024 D64": (8, 16, 16, 1024, 1024, 64, (-1, -1), "fwd"),
    "fwd B4 H16 S4096 D128": (4, 16, 16, 4096, 4096, 128, (-1, -1), "fwd"),
    "train B4 H16 S4096 D128": (4, 16, 16, 4096, 4096, 128, (-1, -1), "train"),
    "GQA B4 H32/KV8 S4096 D128": (4, 32, 8, 4096, 4096, 128, (-1, -1), "fwd"),
    "decode B16 H32/KV8 q1 kv8192 D128": (16, 32, 8, 1, 8192, 128, (-1, -1), "fwd"),
    "window 512 B4 H16 S4096 D128": (4, 16, 16, 4096, 4096, 128, (511, 0), "fwd"),
}
GRAPH = {"fwd B8 H16 S1024 D64", "decode B16 H32/KV8 q1 kv8192 D128"}  # also graph-replayed
# Fixed forward configs: (BLOCK_M, BLOCK_N, warps, stages, maxnreg or 0).
FWD_SWEEP = [(128, 128, 8, 3, 0), (128, 64, 8, 3, 0), (64, 64, 4, 3, 0), (128, 32, 8, 3, 128)]
OVERLAP_SWEEP = [(128, 128, 8, 3, 0), (128, 64, 8, 3, 0)]
GQA_SWEEP = [(128, 128, 8, 3, 0), (128, 64, 8, 3, 0), (64, 64, 4, 3, 0)]
# Backward tiles, one kernel varied at a time: (block_m, block_n, warps, stages).
DKDV_SWEEP = [(32, 64, 4, 3), (32, 64, 4, 4), (64, 64, 4, 3), (32, 128, 8, 3)]
DQ_SWEEP = [(128, 64, 8, 3), (128, 64, 8, 4), (128, 32, 8, 3)]


def modules(baseline: str) -> dict[str, Any]:
    old = load(pathlib.Path(baseline) / "build" / "torch-universal", "_fa_old")
    new = load(REPO / "attention" / "flash_triton" / "build" / "torch-universal", "_fa_new")
    return {"old": old, "new": new}


def inputs(shape: tuple, scale: int = 1, grad: bool = False) -> tuple[torch.Tensor, ...]:
    b, h, kvh, sq, sk, d, _, _ = shape
    if scale > 1:  # warm-up: same kernels, small shapes (q_len > 64 keeps the configs)
        b, sq, sk = 1, (sq if sq == 1 else 256), (2048 if sq == 1 else 256)
    # Seeded: every implementation at one shape sees the same q, k, v, so its output can be
    # compared with cuDNN's (unseeded, the "err vs cuDNN" column compared two independent
    # random problems: ~1.4, i.e. sqrt(2), for every row).
    gen = torch.Generator(device="cuda").manual_seed(b * sq * h + d)
    q = torch.randn(b, sq, h, d, device="cuda", dtype=BF16, generator=gen)
    k, v = (torch.randn(b, sk, kvh, d, device="cuda", dtype=BF16, generator=gen) for _ in "kv")
    return tuple(x.requires_grad_(grad) for x in (q, k, v))


def impl(fa: Any, shape: tuple, scale: int = 1, config: dict | None = None) -> Callable:
    """A timed call of our kernels: forward (autotuned or a fixed config) or a train step."""
    window, mode = shape[6], shape[7]
    q, k, v = inputs(shape, scale, grad=mode == "train")
    if mode == "train":
        dout = torch.randn_like(q)

        def step() -> Any:
            out = fa.flash_attn_func(q, k, v, causal=True, window_size=window)
            out.backward(dout)
            q.grad = k.grad = v.grad = None
            return out

        return step
    if config is not None:
        return lambda: fa.flash_fwd._launch(q, k, v, None, True, config, window_size=window)[0]
    return lambda: fa.flash_attn_func(q, k, v, causal=True, window_size=window)


def cudnn(shape: tuple, scale: int = 1) -> Callable:
    """SDPA's cuDNN backend on [B, H, S, D] tensors (enable_gqa; q_len 1 sees every key)."""
    mode, square = shape[7], shape[3] == shape[4]
    q, k, v = (x.detach().transpose(1, 2).contiguous() for x in inputs(shape, scale))
    for x in (q, k, v):
        x.requires_grad_(mode == "train")
    dout = torch.randn_like(q)

    def run() -> Any:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=square, enable_gqa=True)
        if mode == "train":
            out.backward(dout)
            q.grad = k.grad = v.grad = None
        return out

    return run


def flags(fa: Any, overlap: bool, pack: bool) -> None:
    """Set the new module's launch defaults for one candidate (the autotuner keys on both)."""
    fa.flash_fwd.OVERLAP_UNMASKED = overlap
    fa.flash_fwd.PACK_GQA_DEFAULT = pack


def fwd_config(bm: int, bn: int, w: int, s: int, maxnreg: int, **extra: Any) -> dict[str, Any]:
    c = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s, **extra}
    return c | ({"maxnreg": maxnreg} if maxnreg else {})


def candidates(mods: dict[str, Any], scale: int = 1) -> list[tuple[str, str, Callable, Callable]]:
    """(workload, label, setup, fn builder) for every timed row; setup sets module flags."""
    new = mods["new"]
    rows: list[tuple[str, str, Callable, Callable]] = []
    keep = lambda: flags(new, False, False)  # noqa: E731 (the old behaviour, in the new code)
    default = lambda: flags(new, True, True)  # noqa: E731 (the new defaults)
    for name, shape in WORKLOADS.items():
        rows.append((name, "old", keep, lambda s=shape: impl(mods["old"], s, scale)))
        rows.append((name, "new", default, lambda s=shape: impl(new, s, scale)))  # both on
        if name.startswith(("fwd B4", "train")):
            rows.append((name, "new, overlap off", keep, lambda s=shape: impl(new, s, scale)))
        if not name.startswith("window"):
            rows.append((name, "cuDNN", keep, lambda s=shape: cudnn(s, scale)))
    mha, gqa = WORKLOADS["fwd B4 H16 S4096 D128"], WORKLOADS["GQA B4 H32/KV8 S4096 D128"]
    old = mods["old"]
    for cfg in FWD_SWEEP[:2]:  # the same launch in the old code: what the refactor costs
        c = fwd_config(*cfg)
        rows.append(("sweep MHA", f"old {cfg}", keep, lambda c=c: impl(old, mha, scale, c)))
        rows.append(("sweep GQA", f"old {cfg}", keep, lambda c=c: impl(old, gqa, scale, c)))
    for cfg in FWD_SWEEP:
        c = fwd_config(*cfg, OVERLAP=False, PACK_GQA=False)
        rows.append(("sweep MHA", f"{cfg}", keep, lambda c=c: impl(new, mha, scale, c)))
    for cfg in OVERLAP_SWEEP:
        c = fwd_config(*cfg, OVERLAP=True, PACK_GQA=False)
        rows.append(("sweep MHA", f"{cfg} overlap", keep, lambda c=c: impl(new, mha, scale, c)))
    for cfg in GQA_SWEEP:
        for pack in (False, True):
            c = fwd_config(*cfg, OVERLAP=False, PACK_GQA=pack)
            label = f"{cfg} {'packed' if pack else 'plain'}"
            rows.append(("sweep GQA", label, keep, lambda c=c: impl(new, gqa, scale, c)))
    return rows + backward_rows(new, scale)


def backward_rows(fa: Any, scale: int) -> list[tuple[str, str, Callable, Callable]]:
    """The backward alone (forward outside the timing), one kernel's tiles varied at a time."""
    shape = WORKLOADS["train B4 H16 S4096 D128"]
    default = fa.default_backward_config(128)
    rows = []

    def build(config: Any) -> Callable:
        q, k, v = inputs(shape, scale)
        out, lse = fa.flash_fwd._launch(q, k, v, None, True, None, return_lse=True)
        dout, sm = torch.randn_like(q), 128**-0.5
        return lambda: fa.flash_attn_backward(dout, q, k, v, out, lse, sm, True, config)

    for t in DKDV_SWEEP:
        cfg = fa.BackwardConfig(fa.TileConfig(*t), default.dq)
        rows.append(("sweep bwd", f"dkdv {t}", lambda: None, lambda c=cfg: build(c)))
    for t in DQ_SWEEP[1:]:
        cfg = fa.BackwardConfig(default.dkdv, fa.TileConfig(*t))
        rows.append(("sweep bwd", f"dq {t}", lambda: None, lambda c=cfg: build(c)))
    return rows


def warm(args: tuple[str, int, int]) -> str:
    """Worker: run every nworkers-th row once at small shapes (fills Triton's disk cache)."""
    baseline, index, nworkers = args
    mods = modules(baseline)
    done = 0
    for i, (_, label, setup, make) in enumerate(candidates(mods, scale=8)):
        if i % nworkers == index:
            try:
                setup()
                make()()
                done += 1
            except Exception as e:  # reported; the row is timed as failed later
                print(f"warm-up {label}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    torch.cuda.synchronize()
    return f"worker {index}: {done} rows"


def first_click(baseline: str) -> dict[str, float]:
    """Worker with an empty cache: seconds of the new code's first call per target shape."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")
    mods = modules(baseline)
    flags(mods["new"], True, True)
    times = {}
    for name in ("train B4 H16 S4096 D128",):  # the most kernels to compile: fwd + bwd
        fn = impl(mods["new"], WORKLOADS[name])
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times[name] = time.perf_counter() - t0
    return times


def check_task(baseline: str) -> dict[str, float]:
    """Worker: the float64 checks, beside the warm-up (they compile kernels of their own)."""
    from benchmarks.flash_triton_ab_checks import check_float64

    return check_float64(modules(baseline))


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def quick_rows(mods: dict[str, Any]) -> list[tuple[str, str, Callable, Callable]]:
    """--quick: only the two candidates on and off at two tiles each, and cuDNN beside them."""
    new, keep = mods["new"], lambda: flags(mods["new"], False, False)
    rows = []
    pairs = [("sweep MHA", "fwd B4 H16 S4096 D128", "OVERLAP"),
             ("sweep GQA", "GQA B4 H32/KV8 S4096 D128", "PACK_GQA")]  # fmt: skip
    for workload, shape, flag in pairs:
        rows.append((workload, "cuDNN", keep, lambda s=WORKLOADS[shape]: cudnn(s)))
        for cfg in OVERLAP_SWEEP:
            for on in (False, True):
                c = fwd_config(*cfg, OVERLAP=False, PACK_GQA=False) | {flag: on}
                label = f"{cfg} {flag} {'on' if on else 'off'}"
                rows.append(
                    (workload, label, keep, lambda c=c, s=WORKLOADS[shape]: impl(new, s, 1, c))
                )
    return rows


def quick_decision(rows: list[dict[str, Any]]) -> dict[str, bool]:
    """--quick: a candidate wins if its best tile beats the best tile without it."""

    def best(workload: str, suffix: str) -> float:
        return min(
            r["us"] for r in rows if r["workload"] == workload and r["impl"].endswith(suffix)
        )

    overlap = best("sweep MHA", "OVERLAP on") < best("sweep MHA", "OVERLAP off")
    return {"overlap": overlap, "pack_gqa": best("sweep GQA", "on") < best("sweep GQA", "off")}


def time_rows(
    mods: dict[str, Any], rounds: int, quick: bool = False, chosen: list | None = None
) -> list[dict[str, Any]]:
    """Every row built once, then timed `rounds` times, interleaved (row order each round);
    chosen: these rows instead of the full or --quick list."""
    from triton.testing import do_bench, do_bench_cudagraph

    built = []
    listed = chosen if chosen is not None else quick_rows(mods) if quick else candidates(mods)
    for workload, label, setup, make in listed:
        try:
            setup()
            fn = make()
            out = fn()  # autotunes at this shape (compiled kernels come from the cache)
            torch.cuda.synchronize()
            built.append((workload, label, setup, fn, out))
        except Exception as e:  # a config that does not fit: said, not timed
            print(f"{workload} / {label}: {type(e).__name__}: {str(e)[:160]}", flush=True)
    outs = {(w, lb): o for w, lb, _, _, o in built}
    times: dict[tuple[str, str], dict[str, list[float]]] = {}
    for _ in range(rounds):
        for workload, label, setup, fn, _ in built:
            setup()
            t = times.setdefault((workload, label), {"us": [], "graph us": []})
            t["us"].append(do_bench(fn, warmup=25, rep=60, return_mode="median") * 1e3)
            print(f"{workload} | {label} | {t['us'][-1]:.1f}", flush=True)
            if workload in GRAPH:
                try:
                    graph = do_bench_cudagraph(fn, rep=50, return_mode="median") * 1e3
                    t["graph us"].append(graph)
                except Exception as e:  # a call that cannot be captured: said, not timed
                    print(f"{workload} / {label} graph: {type(e).__name__}: {str(e)[:120]}")
    rows = []
    for (workload, label), t in times.items():
        row = {"workload": workload, "impl": label, "us": statistics.median(t["us"]),
               "us rounds": [round(x, 1) for x in t["us"]]}  # fmt: skip
        if t["graph us"]:
            row["graph us"] = statistics.median(t["graph us"])
        ref = outs.get((workload, "cuDNN"))
        out = outs[(workload, label)]
        if ref is not None and label != "cuDNN" and isinstance(out, torch.Tensor):
            row["err vs cuDNN"] = rel(out, ref.transpose(1, 2))  # cuDNN's [B, H, S, D]
        rows.append(row)
    return rows


def decide(rows: list[dict[str, Any]]) -> dict[str, bool]:
    """Keep a step only if it won: overlap on both the S4096 forward and the train step (new
    vs new with overlap off), packing on the GQA shape (best packed vs best plain config)."""
    us = {(r["workload"], r["impl"]): r["us"] for r in rows}
    fwd, train = "fwd B4 H16 S4096 D128", "train B4 H16 S4096 D128"
    overlap = all(us[(w, "new")] < us[(w, "new, overlap off")] for w in (fwd, train))
    gqa = [(r["us"], r["impl"].endswith("packed")) for r in rows if r["workload"] == "sweep GQA"]
    best = {packed: min(t for t, p in gqa if p == packed) for packed in (False, True)}
    return {"overlap": overlap, "pack_gqa": best[True] < best[False]}


def patch(decision: dict[str, bool]) -> None:
    """Write the decision into this checkout's flash_fwd.py (the Compare that follows loads
    the kernels from disk)."""
    from benchmarks.flash_triton_ab_tma import patch_flags

    patch_flags({"OVERLAP_UNMASKED": decision["overlap"], "PACK_GQA_DEFAULT": decision["pack_gqa"]})


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | impl | µs (median of rounds) | rounds | graph µs | err vs cuDNN |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        graph = f"{r['graph us']:.1f}" if "graph us" in r else ""
        err = f"{r['err vs cuDNN']:.1e}" if "err vs cuDNN" in r else ""
        rounds = " / ".join(f"{x:.1f}" for x in r["us rounds"])
        cells = [r["workload"], r["impl"], f"{r['us']:.1f}", rounds, graph, err]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="old attention/flash_triton copy")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--patch", action="store_true", help="write the keep/drop decision")
    parser.add_argument("--quick", action="store_true", help="the two candidates only")
    parser.add_argument("--tma", action="store_true", help="the TMA forward only (~2 min)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.tma:
        from benchmarks.flash_triton_ab_tma import tma_main

        return tma_main(args.baseline, args.rounds, args.patch, t0)
    if args.quick:
        return quick_main(args.baseline, args.rounds, t0)
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.workers + 2) as pool:
        cold = pool.apply_async(first_click, (args.baseline,))
        checked = pool.apply_async(check_task, (args.baseline,))
        jobs = [(args.baseline, i, args.workers) for i in range(args.workers)]
        print("\n".join(pool.map(warm, jobs)), flush=True)
        first, errs = cold.get(), checked.get()
    print(f"warm-up {time.perf_counter() - t0:.0f} s; first call per shape (s): {first}")
    mods = modules(args.baseline)
    worst = max(errs.values())
    print(f"float64 checks: {len(errs)}, worst {worst:.2e}", flush=True)
    rows = time_rows(mods, args.rounds)
    table = markdown(rows)
    print(table, flush=True)
    decision = decide(rows)
    print(f"decision (kept if it won): {decision}", flush=True)
    if args.patch:
        patch(decision)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "first call s": first, "float64 errors": errs, "rows": rows, "decision": decision,
              "seconds": time.perf_counter() - t0}  # fmt: skip
    if os.environ.get("OUT"):
        out = pathlib.Path(os.environ["OUT"])
        (out / "ab.json").write_text(json.dumps(result, indent=1))
        (out / "ab.md").write_text(table + "\n")
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


def quick_main(baseline: str, rounds: int, t0: float) -> None:
    """--quick: a few float64 checks, then the candidates' rows (no workers, no Compare)."""
    from benchmarks.flash_triton_ab_checks import check_case

    mods = modules(baseline)
    errs: dict[str, float] = {}
    for cfg in OVERLAP_SWEEP:
        for h, kvh, extra in ((2, 2, {"OVERLAP": True}), (8, 2, {"PACK_GQA": True})):
            config = fwd_config(*cfg, OVERLAP=False, PACK_GQA=False) | extra
            case = (1, h, kvh, 1000, 1000, 128, (-1, -1), config, False)
            errs |= check_case(mods["new"], f"{h}/{kvh} heads {cfg} {extra}", *case)
    print(f"float64 checks: {errs}", flush=True)
    rows = time_rows(mods, rounds, quick=True)
    print(markdown(rows), flush=True)
    print(f"decision (kept if it won): {quick_decision(rows)}", flush=True)
    print(f"{torch.cuda.get_device_name()}; done in {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
