"""Per-forward table of every variant at the post's shape and at B4 H16 S4096 D128 (issue #2).

    python benchmarks/results_h200.py --out "$OUT"

Writes results.md (the tables for docs/results-h200.md), results.json and traces.tar.gz (a few
GPU traces to keep as test fixtures). Run on the H200; on CPU pass --device cpu and a tiny shape.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from attention import VARIANTS
from benchmarks.shapes import SHAPES
from profiling.run.runner import RunError, VariantUnavailable, run
from profiling.workload.spec import ConfigError, Workload

KEEP = {"naive-inplace", "sdpa-math", "sdpa-efficient", "flex", "compiled-naive", "naive"}


def fmt(x: float | None, digits: int = 0) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="results-out")
    p.add_argument("--device", default="cuda")
    p.add_argument("--shapes", default="post,long")
    p.add_argument("--tiny", action="store_true", help="B1 H2 S128 D32 float32, for a CPU check")
    p.add_argument("--from", dest="source", help="render runs.jsonl written by pytest -m gpu")
    args = p.parse_args()
    if args.source:
        render(Path(args.source))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, lines = [], []
    name = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor()
    lines.append(f"Device: {name}; torch {torch.__version__}; CUDA {torch.version.cuda}")
    keep: list[Path] = []
    for shape_id in args.shapes.split(","):
        shape = SHAPES[shape_id]
        if args.tiny:
            shape = {"batch": 1, "heads": 2, "seq_len": 128, "head_dim": 32, "dtype": "float32"}
        lines += [
            "",
            f"### {shape_id}: B{shape['batch']} H{shape['heads']} S{shape['seq_len']} "
            f"D{shape['head_dim']} {shape['dtype']} causal",
            "",
            "| variant | GPU µs/fwd | CPU µs/fwd | kernels/fwd | memcpy/memset per fwd | "
            "peak MiB | TFLOP/s | rel. err | ran |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for vid in VARIANTS:
            config = Workload.from_user(variant=vid, device=args.device, **shape)
            try:
                r = run(config, out_dir=out / "traces" / vid)
            except (VariantUnavailable, ConfigError, RunError) as exc:
                lines.append(f"| {vid} | — | — | — | — | — | — | — | unavailable: {exc} |")
                rows.append({"variant": vid, "shape": shape_id, "error": str(exc)})
                print(f"{shape_id} {vid}: {exc}", flush=True)
                continue
            s = r.summary
            lines.append(
                f"| {vid} | {fmt(s.gpu_us_per_forward)} | {fmt(s.cpu_us_per_forward)} | "
                f"{s.kernels_per_forward:g} | "
                f"{s.memcpy_per_forward:g} / {s.memset_per_forward:g} | "
                f"{fmt(s.peak_mib)} | {fmt(s.tflops, 1)} | {s.rel_err:.1e} | {s.ran} |"
            )
            rows.append({"shape": shape_id, **s.as_dict(), "kernels": r.kernels.to_dict("records")})
            print(lines[-1], flush=True)
            if shape_id == "post" and vid in KEEP:
                keep.append(r.trace_gz)
            r.trace_json.unlink(missing_ok=True)
    lines.append("")
    lines.append(
        "GPU µs/fwd = sum of kernel+memcpy+memset durations launched inside the 3 active attn_fwd "
        "spans / 3; CPU µs/fwd = mean attn_fwd CPU span; TFLOP/s counts causal as half of "
        "4·B·H·S²·D; peak = torch.cuda.max_memory_allocated over the profiled steps."
    )
    (out / "results.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps(rows, indent=1, default=str))
    with tarfile.open(out / "traces.tar.gz", "w:gz") as tar:
        for path in keep:
            tar.add(path, arcname=f"{path.parent.name}_{path.name}")
    print("\n".join(lines))


def render(source: Path) -> None:
    """The markdown tables from the runs `pytest -m gpu` recorded (ATTNPROF_RESULTS=DIR)."""
    rows = [json.loads(line) for line in (source / "runs.jsonl").read_text().splitlines()]
    lines = []
    for shape_id, shape in SHAPES.items():
        mine = [r for r in rows if r["shape"] == shape_id]
        if not mine:
            continue
        lines += [
            f"### B{shape['batch']} H{shape['heads']} S{shape['seq_len']} D{shape['head_dim']} "
            f"{shape['dtype']} causal ({mine[0]['device_name']}, torch {mine[0]['torch_version']})",
            "",
            "| variant | GPU µs/fwd | CPU µs/fwd | kernels/fwd | memcpy / memset per fwd | "
            "peak MiB | TFLOP/s | rel. err | ran |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in mine:
            lines.append(
                f"| {r['variant']} | {fmt(r['gpu_us_per_forward'])} | "
                f"{fmt(r['cpu_us_per_forward'])} | {r['kernels_per_forward']:g} | "
                f"{r['memcpy_per_forward']:g} / {r['memset_per_forward']:g} | "
                f"{fmt(r['peak_mib'])} | {fmt(r['tflops'], 1)} | {r['rel_err']:.1e} | {r['ran']} |"
            )
        lines.append("")
    (source / "results.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
