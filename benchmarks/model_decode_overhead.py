"""Issue 43 on the GPU: why a decode's step read from the trace is longer than the bare step.

The decode of 64 tokens is bound by the host (each token's few small kernels wait on Python and
transformers), so whatever the profiler adds per operator on the CPU lengthens the GPU's span
too: the first table of docs/results-model.md read decode steps 1.24–1.64× their CUDA-event
timing, prefill within ±5%. This times one decode step under each profiler setting, against the
bare step, to see which setting leaves the step as it is:

- `cpu+cuda, spans`: the runner's (CPU operators and CUDA activity, the layer spans);
- `cpu+cuda`: the same without the layer spans;
- `cuda, spans` / `cuda`: CUDA activity only (no CPU operators recorded).

For each: the step's wall time (perf_counter around the step, synchronised), the GPU span in
the exported trace (first to last device event of the one active step), and whether the step's
and the layers' spans reached the trace.

    python3 benchmarks/model_decode_overhead.py [--preset llama-3.1-8b] [--repeat 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from profiling.run.model import build as building
from profiling.run.model.markers import marked
from profiling.run.model.steps import make_step
from profiling.vocabulary import MODEL_LAYER, MODEL_STEP
from profiling.workload.model.spec import ModelWorkload

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
SETTINGS = {
    "cpu+cuda, spans": ([ProfilerActivity.CPU, ProfilerActivity.CUDA], True),
    "cpu+cuda": ([ProfilerActivity.CPU, ProfilerActivity.CUDA], False),
    "cuda, spans": ([ProfilerActivity.CUDA], True),
    "cuda": ([ProfilerActivity.CUDA], False),
}


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def bare_ms(step) -> float:
    step.prepare()
    sync()
    began = time.perf_counter()
    step.run()
    sync()
    return (time.perf_counter() - began) * 1e3


def profiled(step, model, activities, spans: bool, folder: Path) -> dict:
    """One active step under the setting: its wall, its trace's GPU span, what spans arrived."""
    context = marked(model) if spans else _nothing()
    with (
        context,
        profile(
            activities=activities, schedule=schedule(wait=0, warmup=1, active=1, repeat=1)
        ) as p,
    ):
        step()
        p.step()
        step.prepare()
        sync()
        began = time.perf_counter()
        step.run()
        sync()
        wall = (time.perf_counter() - began) * 1e3
        p.step()
    path = folder / "trace.json"
    p.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    device = [e for e in events if e.get("cat") in DEVICE_CATS and "dur" in e]
    span = (
        (max(e["ts"] + e["dur"] for e in device) - min(e["ts"] for e in device)) / 1e3
        if device
        else 0.0
    )
    names = {e.get("name") for e in events}
    layers = sum(1 for n in names if isinstance(n, str) and n.startswith(MODEL_LAYER))
    kernels = sum(e.get("cat") == "kernel" for e in device)
    return {"wall_ms": wall, "gpu_span_ms": span, "step_span": MODEL_STEP in names,
            "layer_spans": layers, "kernels": kernels}  # fmt: skip


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="llama-3.1-8b")
    parser.add_argument("--implementation", default="eager")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--device", default="cuda", help="cpu: only to try the script")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--lengths", default="4096,3000,2048,512")
    args = parser.parse_args()
    workload = ModelWorkload.from_user(
        preset=args.preset, batch=4, seq_len=args.seq_len, lengths=args.lengths,
        dtype="bfloat16" if args.device == "cuda" else "float32", mode="decode",
        new_tokens=64, implementations=args.implementation,
        check=False,
    ).validated()  # fmt: skip
    model, _ = building.build(workload, args.device, args.implementation)
    inputs = building.batch(workload, args.device)
    step = make_step(workload, model, inputs, args.device)
    step()  # warm-up
    rows = {"bare": {"wall_ms": statistics.median(bare_ms(step) for _ in range(args.repeat))}}
    with tempfile.TemporaryDirectory() as folder:
        for name, (activities, spans) in SETTINGS.items():
            if args.device == "cpu" and ProfilerActivity.CPU not in activities:
                continue
            seen = [
                profiled(step, model, activities, spans, Path(folder)) for _ in range(args.repeat)
            ]
            rows[name] = {key: statistics.median(s[key] for s in seen) for key in seen[0]}
    bare = rows["bare"]["wall_ms"]
    print(f"{args.preset} {args.implementation} decode 64 tokens, B4 ragged; bare {bare:.1f} ms")
    print("| setting | wall ms | wall / bare | GPU span ms | span / bare | step span | "
          "layer spans | kernels |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        if name == "bare":
            continue
        print(f"| {name} | {row['wall_ms']:.1f} | {row['wall_ms'] / bare:.3f} | "
              f"{row['gpu_span_ms']:.1f} | {row['gpu_span_ms'] / bare:.3f} | {row['step_span']} | "
              f"{row['layer_spans']:.0f} | {row['kernels']:.0f} |")  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"decode-overhead-{args.preset}-{args.implementation}.json").write_text(
            json.dumps(rows, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
