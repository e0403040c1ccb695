"""Issue 43: what a model run adds to the bare script a user would write, as benchmarks/overhead.py
measures it for the variants (docs/performance.md §2: 1.04–1.39× there).

    python3 benchmarks/model_overhead.py [--preset llama-3.1-8b] [--implementations eager,sdpa]
        [--repeats 5] [--out DIR] [--together] [--split]

Bare: the post's 04_c around the model's forward: build the layers (the same builder, so both
pay the same build), the batch, 3 warm-up forwards, profile 5 (wait 1, warmup 1, active 3) with
record_function, export the Chrome trace as .json.gz, write the key_averages table and the peak
memory. App: what a Model click computes for that one implementation (profiling.run.model.run:
validation, memory check, build, the float32 eager reference, SDPA's call caught, warm-up, the
profiled steps with the layer spans, the bare timing, the trace read once, the split, the
Gantt; then the views' tables and text, and the Gantt's JSON). Prefill, the issue's ragged
batch (B4 S4096 4096,3000,2048,512 bf16, 2 layers). Both warm first, then alternated, medians.

--split: where the time goes, part by part, for both: the device is synchronised at each
part's end (the runner's `lap` hook names the app's parts), so the parts add up to the whole;
a table of the median ms of each part follows each row (the syncs make both a little slower
than without --split: take the headline ratio from a run without it). `--device cpu` runs the
tiny preset (B2 S64, lengths 64,40), to try the script anywhere.
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
TINY = {"batch": 2, "seq_len": 64, "lengths": "64,40"}


class Laps:
    """Seconds per named part: the device synchronised at each part's end, the same part's
    laps summed (one click of several implementations runs each part once per
    implementation)."""

    def __init__(self, device: str) -> None:
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.parts: dict[str, float] = {}
        self.began = self.last = time.perf_counter()

    def __call__(self, part: str) -> None:
        self.sync()
        now = time.perf_counter()
        self.parts[part] = self.parts.get(part, 0.0) + now - self.last
        self.last = now

    @property
    def total(self) -> float:
        return self.last - self.began


def nothing(part: str) -> None:
    return None


def bare(
    workload: ModelWorkload, implementation: str, device: str, out: Path, lap=nothing
) -> float:
    """The post's script around the model's forward, from the build to the written .txt."""
    began = time.perf_counter()
    model, _ = building.build(workload, device, implementation)
    inputs = building.batch(workload, device)
    lap("build + batch")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    for _ in range(3):
        prefill_logits(model, inputs)
    lap("warm-up")
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3)) as p:
        for _ in range(5):
            with record_function("model_forward"):
                prefill_logits(model, inputs)
            p.step()
        if device == "cuda":
            torch.cuda.synchronize()
    lap("profiled steps")
    p.export_chrome_trace(str(out / "bare.json.gz"))
    lap("export trace (.json.gz)")
    sort_by = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    text = p.key_averages().table(sort_by=sort_by, row_limit=15)
    if device == "cuda":
        text += f"\npeak memory {torch.cuda.max_memory_allocated() / 1024**2:.0f} MiB\n"
    (out / "bare.txt").write_text(text)
    del model
    lap("key_averages table")
    return time.perf_counter() - began


def app(workload: ModelWorkload, lap=None) -> float:
    """A Model click's computation for one implementation: the run, then its views."""
    began = time.perf_counter()
    result = run(workload, out_dir=tempfile.mkdtemp(prefix="model-overhead-"), lap=lap)
    table.comparison(result), table.categories(result), table.layers(result)
    why.text(result), table.verdict(result)
    (lap or nothing)("views")
    for item in result.runs:
        if item.gantt is not None:
            item.gantt.to_json()  # what gr.Plot sends
    (lap or nothing)("Gantt JSON")
    return time.perf_counter() - began


def split_once(workloads: dict, click: ModelWorkload, device: str, out: Path) -> tuple:
    """One bare script per implementation, then the click, each part lapped."""
    bare_laps = Laps(device)
    for name, workload in workloads.items():
        bare(workload, name, device, out, bare_laps)
    app_laps = Laps(device)
    app(click, app_laps)
    return bare_laps, app_laps


def split_table(bare_runs: list[Laps], app_runs: list[Laps]) -> str:
    """Median ms of each part, the bare script's parts first, then the app's."""
    lines = ["| part | bare ms | app ms |", "|---|---:|---:|"]
    for runs, column in ((bare_runs, 0), (app_runs, 1)):
        for part in runs[0].parts:
            ms = f"{statistics.median(r.parts.get(part, 0.0) for r in runs) * 1e3:.1f}"
            lines.append(f"| {part} | {ms if column == 0 else ''} | {ms if column else ''} |")
    totals = [statistics.median(r.total for r in runs) * 1e3 for runs in (bare_runs, app_runs)]
    lines.append(f"| **total** | **{totals[0]:.1f}** | **{totals[1]:.1f}** |")
    return "\n".join(lines)


def _workloads(args, names: list[str]) -> tuple[dict[str, ModelWorkload], ModelWorkload]:
    """Each implementation's bare-script workload, and the one click of all of them."""
    shape = RAGGED if args.device == "cuda" else TINY

    def workload(implementations: str) -> ModelWorkload:
        return ModelWorkload.from_user(
            preset=args.preset, implementations=implementations, mode="prefill",
            device=args.device, **shape,
        ).validated()  # fmt: skip

    return {name: workload(name) for name in names}, workload(",".join(names))


def split(args, names: list[str]) -> dict:
    """--split: the parts of the bare scripts and of the click, medians of `repeats`."""
    workloads, click = _workloads(args, names)
    bare_runs, app_runs = [], []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.repeats + 2):  # the first two warm both
            bare_laps, app_laps = split_once(workloads, click, args.device, Path(folder))
            if index >= 2:
                bare_runs.append(bare_laps)
                app_runs.append(app_laps)
    bare_s = statistics.median(r.total for r in bare_runs)
    app_s = statistics.median(r.total for r in app_runs)
    print(f"| {args.preset} | {','.join(names)} (split) | {bare_s:.3f} | {app_s:.3f} | "
          f"{app_s / bare_s:.2f}× |", flush=True)  # fmt: skip
    print(split_table(bare_runs, app_runs), flush=True)
    return {"implementations": names, "bare_s": bare_s, "app_s": app_s,
            "bare_parts": [r.parts for r in bare_runs],
            "app_parts": [r.parts for r in app_runs]}  # fmt: skip


def together(args) -> int:
    """One click of every implementation against each one's bare script in turn."""
    names = args.implementations.split(",")
    workloads, click = _workloads(args, names)
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
    parser.add_argument(
        "--split", action="store_true",
        help="where the time goes: each part of the bare script and of the click, the device "
        "synchronised at each part's end (per implementation; with --together, one click)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.split:
        return split_main(args)
    if args.together:
        return together(args)
    shape = RAGGED if args.device == "cuda" else TINY
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


def split_main(args) -> int:
    """--split, per implementation (or, with --together, one click of them all)."""
    names = args.implementations.split(",")
    groups = [names] if args.together else [[name] for name in names]
    rows = [split(args, group) for group in groups]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "model-overhead-split.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
