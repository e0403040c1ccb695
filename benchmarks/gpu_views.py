"""Compare and Sweep on the H200, for docs/results-h200.md (issue #4's evidence).

    python benchmarks/gpu_views.py --out DIR          # or $OUT; about 2–3 minutes on an H200

(a) Compare: every variant at the post's shape, B8 H16 S1024 D64 bfloat16 causal, one after
    another; the glance table as Markdown, CSV and JSON, plus the zip of traces.
(b) Sweep: naive, sdpa-flash and sdpa-cudnn at the post's B8 H16 D64 bfloat16 causal, S from 256
    doubling to 65536. naive's estimate (three B·H·S² bf16 score matrices) passes the 141 GB
    card up to S=8192 and is refused from 16384 on; those points are kept and marked.
Figures: PNG when kaleido can render, else standalone HTML; always the figure JSON and the raw
numbers as JSON, so the charts can be redrawn on a machine without a GPU. Without plotly the
tables and JSON are still written.

Check it end to end on a CPU with a tiny shape:
    python benchmarks/gpu_views.py --device cpu --batch 1 --heads 2 --head-dim 32 \
        --dtype float32 --seq-len 128 --start 64 --stop 256 --out /tmp/views
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention import VARIANTS  # noqa: E402
from profiling.jobs.compare import compare  # noqa: E402
from profiling.jobs.sweep import doubling, points_json, sweep  # noqa: E402
from profiling.text_tables import markdown  # noqa: E402

SWEEP_VARIANTS = ("naive", "sdpa-flash", "sdpa-cudnn")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-views"))
    p.add_argument("--device", default="auto")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--seq-len", type=int, default=1024, help="the compare shape's S")
    p.add_argument("--variants", default=",".join(VARIANTS), help="compare: comma-separated")
    p.add_argument("--sweep-variants", default=",".join(SWEEP_VARIANTS))
    p.add_argument("--start", type=int, default=256, help="sweep: first S")
    p.add_argument("--stop", type=int, default=65536, help="sweep: last S (doubling)")
    p.add_argument("--skip", choices=["compare", "sweep"], action="append", default=[])
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shape = {"batch": args.batch, "heads": args.heads, "head_dim": args.head_dim,
             "dtype": args.dtype, "causal": True, "device": args.device}  # fmt: skip
    if "compare" not in args.skip:
        _offline_if_no_hub()
        run_compare(args.variants.split(","), {**shape, "seq_len": args.seq_len}, out)
    if "sweep" not in args.skip:
        lens = doubling(args.start, args.stop)
        run_sweep(args.sweep_variants.split(","), lens, shape, out)
    return 0


def run_compare(variants: list[str], shape: dict, out: Path) -> None:
    began = time.perf_counter()
    result = compare(variants, out_dir=out / "compare-traces", progress=_progress, **shape)
    seconds = time.perf_counter() - began
    head = f"{result.device_name} · {_shape_text(result.shape)} · {seconds:.0f} s"
    ok = result.glance[result.glance["status"] == "ok"].drop(columns=["status"])
    missing = result.unavailable()
    text = [f"## Compare · {head}", "", markdown(ok)]
    if not missing.empty:
        text += ["Not run:", ""] + [f"- `{r.variant}` ({r.status}): {r.reason}" for r in
                                   missing.itertuples()] + [""]  # fmt: skip
    text += [f"- {n}" for n in result.notes]
    (out / "compare.md").write_text("\n".join(text) + "\n")
    result.glance.to_csv(out / "compare.csv", index=False)
    (out / "compare.json").write_text(
        json.dumps({"device": result.device_name, "shape": result.shape, "seconds": seconds,
                    "rows": json.loads(result.glance.to_json(orient="records"))}, indent=1)
    )  # fmt: skip
    if result.zip_path:
        shutil.copyfile(result.zip_path, out / result.zip_path.name)
    print("\n".join(text), flush=True)
    figures = _figures()
    if figures:
        _write_figure(figures.gpu_cpu_bars(result), out / "compare_bars")
        _write_figure(figures.mini_gantts(result), out / "compare_gantts")


def run_sweep(variants: list[str], lens: list[int], shape: dict, out: Path) -> None:
    began = time.perf_counter()
    result = sweep(variants, lens, out_dir=out / "sweep-traces", progress=_progress, **shape)
    seconds = time.perf_counter() - began
    head = f"{result.device_name} · {_shape_text(result.shape)} · {seconds:.0f} s"
    table = result.table.copy()
    table["reason"] = table["reason"].str.slice(0, 120)
    text = [f"## Sweep · {head}", "", markdown(table)] + [f"- {n}" for n in result.notes]
    (out / "sweep.md").write_text("\n".join(text) + "\n")
    result.table.to_csv(out / "sweep.csv", index=False)
    (out / "sweep.json").write_text(
        json.dumps({"device": result.device, "device_name": result.device_name,
                    "shape": result.shape, "seq_lens": result.seq_lens, "seconds": seconds,
                    "points": points_json(result)}, indent=1, default=str)
    )  # fmt: skip
    if result.zip_path:
        shutil.copyfile(result.zip_path, out / result.zip_path.name)
    print("\n".join(text), flush=True)
    figures = _figures()
    if figures:
        _write_figure(figures.sweep_time_figure(result), out / "sweep_time")
        _write_figure(figures.sweep_memory_figure(result), out / "sweep_memory")


def _offline_if_no_hub() -> None:
    """No route to the Hub (the H200 machine has none): say so up front, so the kernels-hub
    variants fail fast to their stated fallback instead of spending the time budget on retries."""
    from attention import hub

    if not hub.hub_reachable() and not os.environ.get("HF_HUB_OFFLINE"):
        os.environ["HF_HUB_OFFLINE"] = "1"
        print("the Hugging Face Hub is unreachable: HF_HUB_OFFLINE=1 for this run", flush=True)


def _figures():
    """profiling.views.compare_figures, or None without plotly (tables still written)."""
    try:
        from profiling.views import compare_figures
    except ImportError as exc:
        print(f"no figures: {exc}", flush=True)
        return None
    return compare_figures


def _write_figure(fig, stem: Path) -> None:
    """PNG through kaleido when it works, else HTML; the figure JSON always."""
    stem.with_suffix(".fig.json").write_text(fig.to_json())
    try:
        import kaleido  # noqa: F401

        fig.write_image(str(stem.with_suffix(".png")), width=1100, height=650, scale=2)
        print(f"wrote {stem.with_suffix('.png')}", flush=True)
    except Exception as exc:  # kaleido missing, or no browser for it: fall back to HTML
        fig.write_html(str(stem.with_suffix(".html")), include_plotlyjs="cdn")
        print(f"wrote {stem.with_suffix('.html')} (no PNG: {type(exc).__name__})", flush=True)


def _shape_text(c: dict) -> str:
    s = f" S{c['seq_len']}" if "seq_len" in c else ""
    mask = "causal" if c["causal"] else "full"
    return f"B{c['batch']} H{c['heads']}{s} D{c['head_dim']} {c['dtype']} {mask}"


_last = [0.0]


def _progress(fraction: float, text: str) -> None:
    now = time.perf_counter()
    if now - _last[0] > 5 or fraction >= 1.0 or text.endswith("starting"):
        _last[0] = now
        print(f"[{fraction:4.0%}] {text}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
