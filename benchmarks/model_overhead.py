"""Issue 43: what a model run adds to the bare script a user would write, as benchmarks/overhead.py
measures it for the variants (docs/performance.md §2: 1.04–1.39× there).

    python3 benchmarks/model_overhead.py [--preset llama-3.1-8b] [--implementations eager,sdpa]
        [--repeats 5] [--out DIR]

Bare: the post's 04_c around the model's forward: build the layers (the same builder, so both
pay the same build), the batch, 3 warm-up forwards, profile 5 (wait 1, warmup 1, active 3) with
record_function, export the Chrome trace as .json.gz, write the key_averages table and the peak
memory. App: what a Model click computes for that one implementation (profiling.run.model.run:
validation, memory check, build, the float32 eager reference, SDPA's call caught, warm-up, the
profiled steps with the layer spans, the bare timing, the trace read once, the split, the
Gantt; then the views' tables and text, and the Gantt's JSON). Prefill, the issue's ragged
batch (B4 S4096 4096,3000,2048,512 bf16, 2 layers). Both warm first, then alternated, medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from profiling.run.model import build as building
from profiling.run.model.runner import run
from profiling.run.model.steps import prefill_logits
from profiling.views.model import table, why
from profiling.workload.model.spec import ModelWorkload

RAGGED = {"batch": 4, "seq_len": 4096, "lengths": "4096,3000,2048,512", "dtype": "bfloat16"}


def bare(workload: ModelWorkload, implementation: str, device: str, out: Path) -> float:
    """The post's script around the model's forward, from the build to the written .txt."""
    began = time.perf_counter()
    model, _ = building.build(workload, device, implementation)
    inputs = building.batch(workload, device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    for _ in range(3):
        prefill_logits(model, inputs)
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3)) as p:
        for _ in range(5):
            with record_function("model_forward"):
                prefill_logits(model, inputs)
            p.step()
        if device == "cuda":
            torch.cuda.synchronize()
    p.export_chrome_trace(str(out / "bare.json.gz"))
    sort_by = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    text = p.key_averages().table(sort_by=sort_by, row_limit=15)
    if device == "cuda":
        text += f"\npeak memory {torch.cuda.max_memory_allocated() / 1024**2:.0f} MiB\n"
    (out / "bare.txt").write_text(text)
    del model
    return time.perf_counter() - began


def app(workload: ModelWorkload) -> float:
    """A Model click's computation for one implementation: the run, then its views."""
    began = time.perf_counter()
    result = run(workload, out_dir=tempfile.mkdtemp(prefix="model-overhead-"))
    table.comparison(result), table.categories(result), table.layers(result)
    why.text(result), table.verdict(result)
    for item in result.runs:
        if item.gantt is not None:
            item.gantt.to_json()  # what gr.Plot sends
    return time.perf_counter() - began


def together(args) -> int:
    """One click of every implementation against each one's bare script in turn."""
    names = args.implementations.split(",")
    shape = RAGGED if args.device == "cuda" else {"batch": 2, "seq_len": 64, "lengths": "64,40"}
    workloads = {
        name: ModelWorkload.from_user(preset=args.preset, implementations=name, mode="prefill",
                                      device=args.device, **shape).validated()
        for name in names
    }  # fmt: skip
    click = ModelWorkload.from_user(
        preset=args.preset, implementations=args.implementations, mode="prefill",
        device=args.device, **shape,
    ).validated()  # fmt: skip
    bare_s, app_s = [], []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.repeats + 2):  # the first two warm both
            bare_total = sum(bare(workloads[n], n, args.device, Path(folder)) for n in names)
            app_total = app(click)
            if index >= 2:
                bare_s.append(bare_total)
                app_s.append(app_total)
    ratio = statistics.median(app_s) / statistics.median(bare_s)
    print(
        f"| {args.preset} | {args.implementations} in one click | "
        f"{statistics.median(bare_s):.3f} | {statistics.median(app_s):.3f} | {ratio:.2f}× |"
    )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "model-overhead-together.json").write_text(
            json.dumps({"bare_s": bare_s, "app_s": app_s, "ratio": ratio}, indent=1)
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="llama-3.1-8b")
    parser.add_argument("--implementations", default="eager,sdpa")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda", help="cpu: only to try the script (tiny)")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--together", action="store_true",
        help="one click of all the implementations against their bare scripts one after "
        "another (the model is built and the reference made once)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.together:
        return together(args)
    shape = RAGGED if args.device == "cuda" else {"batch": 2, "seq_len": 64, "lengths": "64,40"}
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.implementations.split(","):
            workload = ModelWorkload.from_user(
                preset=args.preset, implementations=name, mode="prefill", device=args.device,
                **shape,
            ).validated()  # fmt: skip
            for _ in range(2):  # warm both: allocator, autotuners, imports
                bare(workload, name, args.device, Path(folder)), app(workload)
            bare_s, app_s = [], []
            for _ in range(args.repeats):
                bare_s.append(bare(workload, name, args.device, Path(folder)))
                app_s.append(app(workload))
            ratio = statistics.median(app_s) / statistics.median(bare_s)
            rows.append({"implementation": name, "bare_s": bare_s, "app_s": app_s,
                         "ratio": ratio})  # fmt: skip
            print(f"| {args.preset} | {name} | {statistics.median(bare_s):.3f} | "
                  f"{statistics.median(app_s):.3f} | {ratio:.2f}× |", flush=True)  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "model-overhead.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
