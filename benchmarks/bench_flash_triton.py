"""Time the Triton FlashAttention forward against SDPA's flash and cuDNN backends (CUDA only).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 benchmarks/bench_flash_triton.py
Prints the tables and, when OUT is set, writes bench_flash_triton.{json,md} under $OUT.
Not a test. "triton (ours)" is flash_attn_func as users call it (autotuned);
"ours graph us" times the same call replayed from a CUDA graph (no Python launch overhead,
L2 not flushed), to show how much of a short call is host time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = pathlib.Path(__file__).resolve().parents[1]
KERNEL_DIR = REPO / "attention" / "flash_triton"
BUILD_DIR = KERNEL_DIR / "build" / "torch-universal"
FLOP_NOTE = (
    "FLOPs = 4*B*H*S^2*D for full attention; causal counts half of that (2*B*H*S^2*D). "
    "TFLOP/s = FLOPs / median time (triton.testing.do_bench, L2 flushed between runs)."
)
IMPLS = ("triton (ours)", "sdpa flash", "sdpa cudnn")


def load_kernel() -> tuple[types.ModuleType, str]:
    try:
        import kernels

        return kernels.get_local_kernel(KERNEL_DIR), "kernels.get_local_kernel"
    except ImportError:
        spec = importlib.util.spec_from_file_location(
            "_flash_attn_triton_bench",
            BUILD_DIR / "__init__.py",
            submodule_search_locations=[str(BUILD_DIR)],
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module, "importlib (kernels not installed)"


def attn_flops(b: int, h: int, s: int, d: int, causal: bool) -> float:
    full = 4.0 * b * h * s * s * d
    return full / 2 if causal else full


def bench(fn: Callable[[], Any], warmup: int, rep: int) -> float:
    """Median time in microseconds (triton.testing.do_bench: CUDA events, L2 flushed)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median") * 1e3


def matmul_tflops(warmup: int, rep: int, n: int = 8192) -> float:
    """Sanity ceiling: an n^3 bf16 matmul on random data."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    us = bench(lambda: a @ a, warmup, rep)
    return 2 * n**3 / (us * 1e-6) / 1e12


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    o, r = out.float(), ref.float()
    return ((o - r).norm() / r.norm()).item()


def sdpa_fn(
    backend: SDPBackend, qt: torch.Tensor, kt: torch.Tensor, vt: torch.Tensor, causal: bool
) -> Callable[[], torch.Tensor]:
    def run() -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    return run


def bench_graph(fn: Callable[[], Any]) -> float:
    """Median time in microseconds of fn replayed from a CUDA graph."""
    from triton.testing import do_bench_cudagraph

    return do_bench_cudagraph(fn, rep=100, return_mode="median") * 1e3


def tuner_timings(fa: types.ModuleType) -> dict[str, float]:
    """The autotuner's per-config median times (us) for the latest tuned shape."""
    tuner = fa.flash_fwd._flash_fwd_autotuned
    timings = getattr(tuner, "configs_timings", None) or {}
    out = {}
    for c, t in timings.items():
        ms = t[0] if isinstance(t, (list, tuple)) else t
        name = f"BM{c.kwargs['BLOCK_M']} BN{c.kwargs['BLOCK_N']} w{c.num_warps} s{c.num_stages}"
        out[name] = round(float(ms) * 1e3, 1)
    return out


def measure_shape(
    fa: types.ModuleType,
    b: int,
    h: int,
    s: int,
    d: int,
    dtype: torch.dtype,
    causal: bool,
    warmup: int,
    rep: int,
) -> dict[str, Any]:
    torch.manual_seed(s + d)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3))
    # SDPA wants [B, H, S, D]: transpose (and make contiguous) outside the timed region.
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    flops = attn_flops(b, h, s, d, causal)
    row: dict[str, Any] = {"B": b, "H": h, "S": s, "D": d, "dtype": str(dtype)[6:]}
    row["causal"] = causal

    impls: dict[str, Callable[[], torch.Tensor]] = {
        "triton (ours)": lambda: fa.flash_attn_func(q, k, v, causal=causal),
        "sdpa flash": sdpa_fn(SDPBackend.FLASH_ATTENTION, qt, kt, vt, causal),
        "sdpa cudnn": sdpa_fn(SDPBackend.CUDNN_ATTENTION, qt, kt, vt, causal),
    }
    outs = {}
    t0 = time.time()
    outs["triton (ours)"] = impls["triton (ours)"]()  # first call autotunes
    torch.cuda.synchronize()
    row["ours config"] = fa.last_autotune_choice()
    row["ours best"] = fa.last_autotune_config()
    row["ours tuning s"] = round(time.time() - t0, 1)
    row["ours tuner us"] = tuner_timings(fa)
    for name in ("sdpa cudnn", "sdpa flash"):
        try:
            outs[name] = impls[name]().transpose(1, 2)
        except RuntimeError as e:  # backend not available for this shape/build
            row[f"{name} error"] = str(e).splitlines()[0][:200]
    ref = outs.get("sdpa cudnn", outs.get("sdpa flash"))
    row["ok"] = ref is not None
    if ref is not None:
        err = rel_err(outs["triton (ours)"], ref)
        row["ours err"] = err
        row["ok"] = err < 1e-2 and bool(outs["triton (ours)"].isfinite().all())
    del outs, ref
    for name, fn in impls.items():
        if f"{name} error" in row:
            continue
        us = bench(fn, warmup, rep)
        row[f"{name} us"] = us
        row[name] = flops / (us * 1e-6) / 1e12  # TFLOP/s
    try:
        row["ours graph us"] = bench_graph(impls["triton (ours)"])
    except Exception as e:  # report and go on
        row["ours graph error"] = f"{type(e).__name__}: {e}"[:200]
    cudnn = row.get("sdpa cudnn us")
    row["ours/cudnn"] = cudnn / row["triton (ours) us"] if cudnn else float("nan")
    return row


def variants_at(
    fa: types.ModuleType, best: dict[str, Any], warmup: int, rep: int
) -> list[dict[str, Any]]:
    """Explicit-config variants of the autotuned winner at the target shape."""
    b, h, s, d = 4, 16, 4096, 128
    torch.manual_seed(1)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
    ref = ref.transpose(1, 2)
    flops = attn_flops(b, h, s, d, True)
    base = dict(best)
    tries: list[tuple[str, dict[str, Any]]] = [("autotuned winner, again (noise check)", {})]
    for c in fa.flash_fwd._prune_configs(
        fa.flash_fwd._make_configs(), {"HEAD_DIM": d, "seqlen": s}
    ):
        cfg = {"block_m": c.kwargs["BLOCK_M"], "block_n": c.kwargs["BLOCK_N"],
               "num_warps": c.num_warps, "num_stages": c.num_stages}  # fmt: skip
        if cfg != base:
            tries.append(("another autotune config", cfg))
    tries += [
        ("winner, masking every key tile (no diagonal split)", {"split_diagonal": False}),
        ("winner, causal query tiles in sequence order", {"heavy_first": False}),
    ]
    rows = []
    for label, change in tries:
        cfg = {**base, **change}

        def run(cfg: dict[str, Any] = cfg) -> torch.Tensor:
            return fa.flash_attn_func_with_config(q, k, v, causal=True, **cfg)

        short = f"BM{cfg['block_m']} BN{cfg['block_n']} w{cfg['num_warps']} s{cfg['num_stages']}"
        try:
            err = rel_err(run(), ref)
            us = bench(run, warmup, rep)
            rows.append(
                {"variant": label, "config": short, "us": us, "TFLOP/s": flops / us / 1e6,
                 "err": err}
            )  # fmt: skip
        except Exception as e:  # report and go on: this is a survey
            rows.append({"variant": label, "config": short, "error": f"{type(e).__name__}: {e}"})
    return rows


def fmt_table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    def cell(x: Any) -> str:
        if isinstance(x, float):
            if x != x:  # NaN
                return "-"
            return f"{x:.1e}" if abs(x) < 1e-2 else f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"
        return str(x)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--head-dims", default="128,64")
    parser.add_argument("--warmup", type=int, default=25, help="do_bench warmup, ms")
    parser.add_argument("--rep", type=int, default=100, help="do_bench repetitions, ms")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_flash_triton.py needs a CUDA GPU")

    import triton

    started = time.time()
    fa, how = load_kernel()
    dev = torch.cuda.get_device_name()
    print(f"device {dev}; torch {torch.__version__}; triton {triton.__version__}; loaded via {how}")
    print(FLOP_NOTE)
    print("autotune configs (before pruning):", ", ".join(fa.autotune_configs()))
    mm_tflops = matmul_tflops(args.warmup, args.rep)
    print(f"bf16 matmul 8192^3 on random data: {mm_tflops:.0f} TFLOP/s")

    b, h = 4, 16
    rows = []
    for d in (int(x) for x in args.head_dims.split(",")):
        for s in (int(x) for x in args.seqs.split(",")):
            r = measure_shape(fa, b, h, s, d, torch.bfloat16, True, args.warmup, args.rep)
            rows.append(r)
            torch.cuda.empty_cache()
            print(
                f"S={s:6d} D={d:3d}: "
                + " | ".join(f"{n} {r.get(n, float('nan')):6.1f}" for n in IMPLS)
                + f" TFLOP/s | ours {r.get('triton (ours) us', float('nan')):8.1f} us"
                + f" | graph {r.get('ours graph us', float('nan')):8.1f} us"
                + f" | ok {r['ok']} | {r['ours config']} (tuned in {r['ours tuning s']} s)",
                flush=True,
            )
            timings = sorted(r["ours tuner us"].items(), key=lambda x: x[1])
            print("  autotuner's timings, us:", timings)

    target = next((r for r in rows if r["S"] == 4096 and r["D"] == 128), None)
    variants: list[dict[str, Any]] = []
    if target is not None and target["ours best"] is not None:
        variants = variants_at(fa, target["ours best"], args.warmup, args.rep)

    md = [f"# Triton FlashAttention forward vs SDPA on {dev}", "", FLOP_NOTE, ""]
    if target is not None:
        md += [
            "## Target: B=4 H=16 S=4096 D=128 bf16 causal", "",
            fmt_table([target], [f"{n} us" for n in IMPLS] + list(IMPLS) + ["ours/cudnn",
                                 "ours graph us", "ours config"]),
            "",
        ]  # fmt: skip
    md += [
        "## TFLOP/s by sequence length (B=4 H=16 bf16 causal)", "",
        fmt_table(rows, ["D", "S", *IMPLS, "ours/cudnn", "triton (ours) us", "ours graph us",
                         "ours err", "ok", "ours config"]),
        "",
    ]  # fmt: skip
    if variants:
        md += [
            "## Variants of the winner at the target shape (explicit config)", "",
            fmt_table(variants, ["variant", "config", "us", "TFLOP/s", "err", "error"]),
            "",
        ]  # fmt: skip
    md.append(
        f"bf16 matmul 8192^3: {mm_tflops:.0f} TFLOP/s. "
        f"torch {torch.__version__}, triton {triton.__version__}. "
        f"Whole run {time.time() - started:.0f} s."
    )
    text = "\n".join(md)
    print()
    print(text)

    out_dir = os.environ.get("OUT")
    if out_dir:
        p = pathlib.Path(out_dir)
        (p / "bench_flash_triton.md").write_text(text + "\n")
        payload = {"device": dev, "torch": torch.__version__, "triton": triton.__version__,
                   "flop_note": FLOP_NOTE, "matmul_tflops": mm_tflops, "rows": rows,
                   "variants": variants}  # fmt: skip
        (p / "bench_flash_triton.json").write_text(json.dumps(payload, indent=1, default=str))
    if not all(r["ok"] for r in rows):
        print("WARNING: some shapes failed the correctness check against SDPA")
        sys.exit(1)


if __name__ == "__main__":
    main()
