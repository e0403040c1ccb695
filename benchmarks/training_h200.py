"""The training table (issue 20): every variant in `backward` and `train` mode at the two H200
shapes, each run's figures per phase, what its forward saves, its peak against the estimate.

    python benchmarks/training_h200.py --out DIR [--variant ID ...] [--shape post long]

Prints one Markdown table per shape (the one docs/results-h200.md quotes) and writes DIR/
runs.jsonl (a summary and each phase's kernel table per run) and the traces of the post shape's
naive and sdpa-flash training steps, for the Gantt pictures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention import VARIANTS
from benchmarks.shapes import SHAPES
from profiling.run import runner
from profiling.run.reference import check as reference_check
from profiling.run.runner import run
from profiling.workload.memory import REFERENCE_CHUNK, estimate_bytes
from profiling.workload.spec import Workload

PICTURED = ("naive", "sdpa-flash")  # their post-shape training traces are kept


def measured(workload: Workload, out: Path) -> dict:
    """One run: its summary, per-phase kernels, the whole run's peak vs the estimate, and the
    peak of each stage (warm-up, profiled steps, saved-tensor count, the two reference checks)
    over the memory held before the run. The reference checks run at their smallest chunk,
    the one the estimate counts (tests/gpu/test_gpu.py does the same)."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    baseline = torch.cuda.memory_allocated()
    stages: dict[str, float] = {}
    reset = torch.cuda.reset_peak_memory_stats

    def stage_done(name: str) -> None:
        torch.cuda.synchronize()
        stages[name] = (torch.cuda.max_memory_allocated() - baseline) / 2**20
        reset()

    def staged(name: str, function):
        def wrapper(*args, **kwargs):
            result = function(*args, **kwargs)
            stage_done(name)
            return result

        return wrapper

    reset()
    patches = [
        (torch.cuda, "reset_peak_memory_stats", lambda *a, **k: stage_done("warm-up")),
        (runner.training, "saved_for_backward", None),
        (runner, "relative_error", None),
        (runner, "gradient_errors", None),
        (reference_check, "REFERENCE_CHUNK", (REFERENCE_CHUNK[0], REFERENCE_CHUNK[0])),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    names = {
        "saved_for_backward": "saved",
        "relative_error": "reference",
        "gradient_errors": "grad",
    }
    for owner, name, value in patches:
        setattr(owner, name, staged(names[name], getattr(owner, name)) if value is None else value)
    try:
        result = run(workload, out_dir=out)
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
    stage_done("end")
    phases = {
        name: phase.kernels[["name", "category", "decoded", "count"]].to_dict("records")
        for name, phase in result.trace.phases.items()
    }
    return {
        **result.summary.as_dict(),
        "phase_kernels": phases,
        "stage_peaks_mib": stages,
        "whole_peak_mib": max(stages.values()),
        "estimate_mib": estimate_bytes(workload) / 2**20,
        "trace_gz": str(result.trace_gz),
    }


def row_text(row: dict) -> str:
    if "error" in row:
        return f"| {row['variant']} | {row['mode']} | {row['error']} |" + " |" * 9
    phases = {p["phase"]: p for p in row["phases"]}
    fwd, bwd = phases.get("attn_fwd", {}), phases.get("attn_bwd", {})

    def number(value, digits=1):
        return "–" if value is None else f"{value:,.{digits}f}"

    kernels = " / ".join(number(p.get("kernels_per_forward"), 0) if p else "–" for p in (fwd, bwd))
    errors = " / ".join(f"{row['grad_err'][n]:.1e}" for n in ("dq", "dk", "dv"))
    saved = (row["saved_extra_bytes"] or 0) / 2**20
    return (
        f"| {row['variant']} | {row['mode']} | {number(fwd.get('gpu_us_per_forward'))} | "
        f"{number(bwd.get('gpu_us_per_forward'))} | {kernels} | {saved:,.1f} | "
        f"{number(row['peak_mib'], 0)} | {number(row['whole_peak_mib'], 0)} | "
        f"{number(row['estimate_mib'], 0)} | "
        f"{number(bwd.get('tflops'))} | {errors} | {row['ran']} |"
    )


HEADER = (
    "| variant | mode | fwd GPU µs | bwd GPU µs | kernels fwd / bwd | saved MiB | step peak MiB "
    "| whole-run peak MiB | estimate MiB | bwd TFLOP/s | dQ / dK / dV rel. err | ran |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--variant", nargs="*", default=list(VARIANTS))
    parser.add_argument("--shape", nargs="*", default=list(SHAPES))
    parser.add_argument("--mode", nargs="*", default=["train", "backward"])
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"`python benchmarks/training_h200.py --out {args.out}` on {torch.cuda.get_device_name()}"
    )
    for shape_id in args.shape:
        print(f"\n### {shape_id}: {SHAPES[shape_id]}\n\n{HEADER}")
        for variant in args.variant:
            for mode in args.mode:
                workload = Workload.from_user(
                    variant=variant, device="cuda", mode=mode, **SHAPES[shape_id]
                )
                folder = out / "runs" / f"{shape_id}-{variant}-{mode}"
                try:
                    row = measured(workload, folder)
                except Exception as exc:  # reported in the table: a failure is a result
                    row = {
                        "variant": variant,
                        "mode": mode,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                row["shape"] = shape_id
                print(row_text(row), flush=True)
                with open(out / "runs.jsonl", "a") as fh:
                    fh.write(json.dumps(row, default=str) + "\n")
                if (
                    shape_id == "post"
                    and mode == "train"
                    and variant in PICTURED
                    and "error" not in row
                ):
                    shutil.copy(row["trace_gz"], out / f"train-{variant}.json.gz")
                shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
