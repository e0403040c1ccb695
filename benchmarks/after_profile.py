"""Why the app's steps cost more inside a run than in a tight loop (issue #7 overhead).

    python benchmarks/after_profile.py --variant sdpa-flash     # on the H200
    TEARDOWN_CUPTI=1 python benchmarks/after_profile.py         # Kineto's CUPTI teardown forced

click_stages.py found the trace parse, tables and Gantt ~1.8x dearer inside a run than
parse_floor.py's tight loop, and the float64 reference's launches ~3x dearer. This script
separates the candidate causes, in one process:

- the same work before any profiler has run in the process, and after one has (CUPTI left
  attached after profiling slows every launch: pytorch/kineto#1264);
- inside run-like rounds (profile + export, then the step), timed straight after the export,
  with the cyclic collector paused, as a second pass right after a first, and after a sleep.

Per-launch cost is a small in-place add, queued 200 times. Medians, in µs or ms as labelled.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from profiling.analysis.summary import forward_work, per_forward
from profiling.gantt.spec import gantt_spec
from profiling.kernels.names import kernel_table
from profiling.run import export as run_export
from profiling.run import runner
from profiling.run.reference import check as reference_check
from profiling.trace import model as trace_model
from profiling.workload.memory import check_memory
from profiling.workload.spec import Workload, resolve_device

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "sdpa_flash_8_16_1024_64_bf16.json.gz"


def post_processing(path: Path) -> float:
    """The run's steps after the export, as `run_result.build_result` takes them (less the operator
    table, which needs a live profiler); ms."""
    began = time.perf_counter()
    trace = trace_model.load(path)
    windows, work = forward_work(trace)
    per_forward(trace, windows=windows, work=work)
    kernel_table(work, per=max(len(windows), 1))
    gantt_spec(trace.spans, trace.lanes, title="x").to_json()
    return (time.perf_counter() - began) * 1e3


def launch_us(device: str, n: int = 200) -> float:
    """CPU cost of one launch of a tiny kernel."""
    x = torch.zeros(16, device=device)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    took = (time.perf_counter() - began) / n * 1e6
    torch.cuda.synchronize()
    return took


def median(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="sdpa-flash")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    device = resolve_device("auto")
    if device != "cuda":
        sys.exit("needs a GPU: the question is what a CUDA profiler session leaves behind")
    config = Workload.from_user(variant=args.variant, device=device).validated()
    variant = config.spec
    problem = config.problem(device)
    tensors = runner._inputs(config, device, variant.layout)
    built = variant.build(problem)
    with torch.no_grad(), variant.context():
        tensors["out"] = built.forward(tensors["q"], tensors["k"], tensors["v"])
    spare = check_memory(config, device)
    out = Path(tempfile.mkdtemp(prefix="after-profile-"))
    stored = out / "stored.json"
    with gzip.open(FIXTURE) as src, open(stored, "wb") as dst:
        shutil.copyfileobj(src, dst)

    def reference_ms() -> float:
        began = time.perf_counter()
        finish = reference_check.relative_error(tensors, config, variant.layout, device, spare)
        took = (time.perf_counter() - began) * 1e3
        finish()
        return took

    def session():
        prof = runner._profile(config, built, variant, tensors, device, lambda f, t: None)
        paths = run_export.export(prof, config, device, out)
        paths.gz_written.result()
        return paths

    def standalone() -> dict[str, float]:
        for _ in range(5):
            post_processing(stored), reference_ms(), launch_us(device)
        return {
            "launch µs": median(lambda: launch_us(device), 30),
            "reference launches ms": median(reference_ms, 30),
            "parse + tables + Gantt ms (stored trace)": median(lambda: post_processing(stored), 30),
        }

    print(f"{args.variant} at {config.shape_text()} on {torch.cuda.get_device_name()}; "
          f"torch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"TEARDOWN_CUPTI={os.environ.get('TEARDOWN_CUPTI', '(unset)')}")  # fmt: skip
    before = standalone()
    session()
    after = standalone()
    print("\n| tight loop | before any profiler | after one profiler session |")
    print("|---|---|---|")
    for key in before:
        print(f"| {key} | {before[key]:.2f} | {after[key]:.2f} |")

    def in_round(mode: str) -> dict[str, float]:
        paths = session()
        if mode == "after a 20 ms sleep":
            time.sleep(0.02)
        if mode == "second pass":
            post_processing(paths.json)
        paused = mode == "collector paused"
        if paused:
            gc.disable()
        try:
            row = {
                "launch µs": launch_us(device),
                "reference launches ms": reference_ms(),
                "parse + tables + Gantt ms": post_processing(paths.json),
            }
        finally:
            if paused:
                gc.enable()
        return row

    modes = ["straight after the export", "collector paused", "second pass", "after a 20 ms sleep"]
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for m in modes:
        in_round(m)  # warm
    for _ in range(args.rounds):
        for m in modes:  # interleaved, so drift of the host hits every mode alike
            rows[m].append(in_round(m))
    keys = list(rows[modes[0]][0])
    print(f"\n| inside a round (profile + export, then the step; {args.rounds} rounds) | "
          + " | ".join(keys) + " |")  # fmt: skip
    print("|---" * (len(keys) + 1) + "|")
    for m in modes:
        cells = " | ".join(f"{statistics.median(r[k] for r in rows[m]):.2f}" for k in keys)
        print(f"| {m} | {cells} |")


if __name__ == "__main__":
    main()
