"""Does the app's GPU µs/forward match an independent timing of the same forward? (issue #7)

    python benchmarks/fidelity.py --out "$OUT"

For each variant and shape: the app's figure (sum of the GPU work launched inside the active
attn_fwd spans / steps) against CUDA-graph replay of the same forward: 3 forwards per graph,
as many as the profiled steps, each replay synchronised and timed with CUDA events, median of
30 (plain launches timed the same way where capture fails). Short bursts on purpose: a first
version replayed 10 forwards × 20 back to back, and the most power-hungry kernels (cuDNN at
587 TFLOP/s) ran ~13% slower under that sustained load than in the profiled steps. Graph
replay removes CPU launch cost, so for a CPU-bound run the app's number and the replay agree
while wall time per forward does not: the app flags those runs as CPU-bound.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from attention import VARIANTS, Problem
from profiling.config import ConfigError, RunConfig
from profiling.runner import RunError, VariantUnavailable, _inputs, run

SHAPES = {
    "post": {"batch": 8, "heads": 16, "seq_len": 1024, "head_dim": 64, "dtype": "bfloat16"},
    "long": {"batch": 4, "heads": 16, "seq_len": 4096, "head_dim": 128, "dtype": "bfloat16"},
}
PER_GRAPH, REPLAYS = 3, 30


def independent_us(config: RunConfig) -> tuple[float, float, str]:
    """(median µs per forward on the GPU, wall µs per forward launched eagerly, method)."""
    variant = config.spec
    t = _inputs(config, "cuda", variant.layout)
    problem = Problem(config.batch, config.heads, config.seq_len, config.head_dim, config.causal,
                      config.torch_dtype, "cuda")  # fmt: skip
    built = variant.build(problem)
    q, k, v = t["q"], t["k"], t["v"]
    with torch.no_grad(), variant.context():
        for _ in range(variant.warmup_calls + 2):
            built.forward(q, k, v)
        torch.cuda.synchronize()
        eager = _time_events(lambda: [built.forward(q, k, v) for _ in range(PER_GRAPH)])
        method = "CUDA-graph replay"
        try:
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                built.forward(q, k, v)
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(graph):
                for _ in range(PER_GRAPH):
                    built.forward(q, k, v)
            replay = _time_events(graph.replay)
        except Exception as exc:  # some launches cannot be captured: say so, time eagerly
            method = f"eager launches (capture failed: {type(exc).__name__})"
            torch.cuda.synchronize()
            replay = eager
    return replay / PER_GRAPH, eager / PER_GRAPH, method


def _time_events(fn) -> float:
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="fidelity-out")
    p.add_argument("--shapes", default="post,long")
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    lines = [
        "| shape | variant | app GPU µs/fwd | replay µs/fwd | app/replay | eager wall µs/fwd | "
        "app CPU µs/fwd | app says | method |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for shape_id in args.shapes.split(","):
        for vid in args.variants.split(","):
            config = RunConfig.from_user(variant=vid, device="cuda", **SHAPES[shape_id])
            try:
                s = run(config).summary
                replay, eager, method = independent_us(config)
            except (VariantUnavailable, ConfigError, RunError) as exc:
                lines.append(f"| {shape_id} | {vid} | — | — | — | — | — | unavailable | {exc} |")
                continue
            ratio = s.gpu_us_per_forward / replay
            says = "CPU-bound" if s.cpu_bound else "GPU-bound"
            lines.append(
                f"| {shape_id} | {vid} | {s.gpu_us_per_forward:.1f} | {replay:.1f} | "
                f"{ratio:.3f} | {eager:.1f} | {s.cpu_us_per_forward:.1f} | {says} | {method} |"
            )
            rows.append({"shape": shape_id, "variant": vid, "app_gpu_us": s.gpu_us_per_forward,
                         "replay_us": replay, "eager_us": eager, "ratio": ratio,
                         "cpu_us": s.cpu_us_per_forward, "cpu_bound": s.cpu_bound,
                         "method": method})  # fmt: skip
            print(lines[-1], flush=True)
    (out / "fidelity.md").write_text("\n".join(lines) + "\n")
    (out / "fidelity.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
