"""Does a click after the GPU sat idle report slower kernels than one right after another?

    python benchmarks/idle_gpu.py --variant kernels-flash-attn2 sdpa-cudnn sdpa-flash

fidelity.py found that a CUDA-graph replay timed after 0.1 s of idle and a few eager forwards
reads short kernels up to 30% slower than the same replay back to back: the GPU's clocks drop
when it idles and take a while to come back. A user clicks Profile after seconds of idle,
while fidelity.py's app runs follow one another. Here each variant is profiled by
`profiling.run` after 0, 0.1 and 2 s of idle (interleaved, `--rounds` times each); the table
gives the median GPU µs/forward the app reports for each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.shapes import SHAPES
from profiling.run.runner import run
from profiling.workload.spec import Workload

IDLE_S = (0.0, 0.1, 2.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", nargs="+", default=["kernels-flash-attn2", "sdpa-cudnn"])
    parser.add_argument("--shape", nargs="+", default=["post"], choices=list(SHAPES))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| shape | variant | " + " | ".join(f"after {s:g} s idle" for s in IDLE_S) + " |")
    print("|---|---|" + "---|" * len(IDLE_S))
    for shape in args.shape:
        for name in args.variant:
            config = Workload.from_user(variant=name, device="cuda", **SHAPES[shape])
            run(config)  # compilers and autotuners, once
            seen: dict[float, list[float]] = {s: [] for s in IDLE_S}
            for _ in range(args.rounds):
                for idle in IDLE_S:
                    time.sleep(idle)
                    seen[idle].append(run(config).summary.gpu_us_per_forward)
            cells = " | ".join(f"{statistics.median(seen[s]):.1f}" for s in IDLE_S)
            print(f"| {shape} | {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
