"""Time the Triton FlashAttention's inference shapes (issue 21) against SDPA (CUDA only).

Run from the repository root:
    PYTHONUNBUFFERED=1 python3 benchmarks/bench_flash_triton_shapes.py [--baseline DIR]
Prints tables and, when OUT is set, writes bench_flash_triton_shapes.{json,md} under $OUT.
Not a test. Presets: LLM decode (B16 H32/KV8 q 1, kv 8192, D128 bf16), GQA prefill (B4 H32/KV8
S4096 D128 bf16 causal), sliding window 1024 (the prefill with window (1023, 0)). SDPA gets
the same GQA inputs (enable_gqa=True); a backend that refuses them is reported with torch's
reason. Bytes moved = Q, K, V read once + O written once; HBM peak 4.8 TB/s (H200).
--baseline DIR: a copy of attention/flash_triton from before issue 21 (DIR/build/...), timed
against the current kernel on the square causal MHA forward, interleaved in this process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = pathlib.Path(__file__).resolve().parents[1]
HBM_PEAK = 4.8e12  # bytes/s, H200
BACKENDS = {
    "sdpa cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa flash": SDPBackend.FLASH_ATTENTION,
    "sdpa efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def load(build: pathlib.Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, build / "__init__.py", submodule_search_locations=[str(build)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bench(fn: Callable[[], Any]) -> float:
    """Median µs (triton.testing.do_bench: CUDA events, L2 flushed between runs)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def bench_graph(fn: Callable[[], Any]) -> float:
    """Median µs of fn replayed from a CUDA graph (no host time, L2 not flushed)."""
    from triton.testing import do_bench_cudagraph

    return do_bench_cudagraph(fn, rep=100, return_mode="median") * 1e3


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def visible(sq: int, sk: int, causal: bool, window: tuple[int, int]) -> torch.Tensor:
    """The API's bottom-right mask, [sq, sk] bool (as its test does)."""
    left, right = window
    right = 0 if causal else right
    diag = torch.arange(sq, device="cuda")[:, None] + (sk - sq)
    j = torch.arange(sk, device="cuda")[None, :]
    seen = torch.ones(sq, sk, dtype=torch.bool, device="cuda")
    if right >= 0:
        seen &= j <= diag + right
    if left >= 0:
        seen &= j >= diag - left
    return seen


def sdpa_call(name: str, q: Any, k: Any, v: Any, mask: Any, causal: bool) -> Callable:
    """SDPA on [B, H, S, D] views with enable_gqa; mask None means no mask (or is_causal)."""

    def run() -> torch.Tensor:
        with sdpa_kernel(BACKENDS[name]):
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True
            )

    return run


def try_first_call(fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor | None, str]:
    """(output, '') or (None, 'refused: <torch's reason>')."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn()
            torch.cuda.synchronize()
            return out, ""
        except Exception as e:  # a backend that refuses the input: report, go on
            reasons = [str(w.message).splitlines()[0] for w in caught] or [str(e)]
            return None, "refused: " + " | ".join(r[:160] for r in reasons)


def measure(
    label: str, fn: Callable[[], torch.Tensor], ref: torch.Tensor | None, work: dict[str, float]
) -> dict[str, Any]:
    """One row: µs, TFLOP/s, TB/s, % of HBM peak, relative error against ref (if given)."""
    out, refused = try_first_call(fn)
    row: dict[str, Any] = {"impl": label}
    if out is None:
        row["note"] = refused
        return row
    if ref is not None and out.shape != ref.shape:
        out = out.transpose(1, 2)  # SDPA's [B, H, S, D]
    us = bench(fn)
    row.update(us=us, tflops=work["flops"] / us / 1e6, tbs=work["bytes"] / us / 1e6)
    row["hbm %"] = 100 * work["bytes"] / (us * 1e-6) / HBM_PEAK
    if ref is not None:
        row["err"] = rel_err(out, ref)
    return row


def preset_rows(
    fa: types.ModuleType, b: int, sq: int, sk: int, h: int, kvh: int, window: tuple[int, int]
) -> list[dict[str, Any]]:
    """Ours (the public call, and the forward path forced) and every SDPA backend."""
    torch.manual_seed(sq + sk)
    d, causal = 128, True
    q = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, sk, kvh, d, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    seen = visible(sq, sk, causal, window)
    pairs = float(seen.sum().item())
    work = {"flops": 4.0 * b * h * d * pairs, "bytes": 2.0 * (2 * q.numel() + 2 * k.numel())}

    def call() -> torch.Tensor:
        return fa.flash_attn_func(q, k, v, causal=causal, window_size=window)

    ours = call()
    rows = [measure("triton (ours)", call, ours, work)]
    rows[0]["config"] = "decode path" if sq <= 64 else fa.last_autotune_choice()
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    # Square causal without window: is_causal (top-left == bottom-right); decode q 1: no mask
    # (the row sees every key); windows: the boolean mask.
    plain = window == (-1, -1)
    mask = None if plain else seen
    sdpa_causal = plain and sq == sk
    for name in BACKENDS:  # err: against ours
        row = measure(name, sdpa_call(name, qt, kt, vt, mask, sdpa_causal), ours, work)
        rows.append(row)
    agreeing = [r for r in rows[1:] if "err" in r]
    if agreeing:  # ours against the first SDPA backend that ran
        rows[0]["err"] = agreeing[0]["err"]
        rows[0]["note"] = f"err vs {agreeing[0]['impl']}"
    if sq <= 64:  # what the split buys: the forward's own grid on the same call
        fwd = lambda: fa.flash_attn_func_with_config(  # noqa: E731
            q, k, v, causal=True, window_size=window, block_m=16, block_n=64, num_warps=4
        )
        rows.append(measure("triton forward path (no split)", fwd, ours, work))
        try:
            graph_us = bench_graph(call)
            rows.append({"impl": "triton (ours), CUDA graph replay", "us": graph_us})
            rows[-1].update(tbs=work["bytes"] / graph_us / 1e6)
            rows[-1]["hbm %"] = 100 * work["bytes"] / (graph_us * 1e-6) / HBM_PEAK
        except Exception as e:  # report and go on
            rows.append({"impl": "triton (ours), CUDA graph replay", "note": str(e)[:200]})
        for splits in (1, 2, 4, 8, 16, 32):
            fn = lambda s=splits: fa.flash_attn_decode(  # noqa: E731
                q, k, v, causal=True, window_size=window, num_splits=s
            )
            rows.append(measure(f"decode, {splits} splits (autotuned tiles)", fn, ours, work))
    return rows


def baseline_rows(fa: types.ModuleType, base: types.ModuleType) -> list[dict[str, Any]]:
    """Square causal MHA, B4 H16 S4096 D128 bf16: this kernel vs the one before issue 21."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
    work = {"flops": 2.0 * 4 * 16 * 4096**2 * 128, "bytes": 8.0 * q.numel()}
    rows = []
    for rnd in range(2):  # interleaved twice: the spread is the noise
        for tiles in ((128, 128, 8, 3), (128, 64, 8, 3)):
            kw = dict(zip(("block_m", "block_n", "num_warps", "num_stages"), tiles, strict=True))
            for label, mod in (("now", fa), ("before", base)):
                fn = lambda m=mod, kw=kw: m.flash_attn_func_with_config(q, k, v, causal=True, **kw)  # noqa: E731
                row = measure(
                    f"{label} BM{tiles[0]} BN{tiles[1]} (round {rnd + 1})", fn, None, work
                )
                rows.append(row)
        for label, mod in (("now", fa), ("before", base)):
            fn = lambda m=mod: m.flash_attn_func(q, k, v, causal=True)  # noqa: E731
            rows.append(measure(f"{label} autotuned (round {rnd + 1})", fn, None, work))
            rows[-1]["config"] = mod.last_autotune_choice()
    return rows


def table(title: str, rows: list[dict[str, Any]]) -> str:
    cols = ["impl", "us", "tflops", "tbs", "hbm %", "err", "config", "note"]
    lines = [f"### {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            x = r.get(c, "")
            digits = {"err": ".3g", "tbs": ".2f"}.get(c, ".1f")
            cells.append(f"{x:{digits}}" if isinstance(x, float) else str(x))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=pathlib.Path, default=None)
    args = parser.parse_args()
    print("command:", " ".join([sys.executable, *sys.argv]))
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    fa = load(REPO / "attention" / "flash_triton" / "build" / "torch-universal", "_fa_shapes")
    presets = {
        "LLM decode: B16 H32/KV8, q_len 1 vs kv_len 8192, D128 bf16": (
            16, 1, 8192, 32, 8, (-1, -1)),
        "GQA prefill: B4 H32/KV8 S4096 D128 bf16 causal": (4, 4096, 4096, 32, 8, (-1, -1)),
        "sliding window 1024: B4 H32/KV8 S4096 D128 bf16 causal, window (1023, 0)": (
            4, 4096, 4096, 32, 8, (1023, 0)),
    }  # fmt: skip
    results: dict[str, list[dict[str, Any]]] = {}
    md = [f"command: `{' '.join(sys.argv)}`\n"]
    for title, shape in presets.items():
        results[title] = preset_rows(fa, *shape)
        md.append(table(title, results[title]))
        print(md[-1], flush=True)
    if args.baseline is not None:
        base = load(args.baseline / "build" / "torch-universal", "_fa_before")
        title = "Square causal MHA B4 H16 S4096 D128 bf16: now vs before issue 21"
        results[title] = baseline_rows(fa, base)
        md.append(table(title, results[title]))
        print(md[-1], flush=True)
    out_dir = os.environ.get("OUT")
    if out_dir:
        path = pathlib.Path(out_dir)
        (path / "bench_flash_triton_shapes.json").write_text(json.dumps(results, indent=1))
        (path / "bench_flash_triton_shapes.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
