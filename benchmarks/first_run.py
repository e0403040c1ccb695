"""Is a process's first Profile click at a new shape slower than the next ones? (issue #7)

    python benchmarks/first_run.py plain     # on the H200; one fresh process per mode
    python benchmarks/first_run.py hot       # the kernel called (and autotuned) just before
    python benchmarks/first_run.py settle    # the same, then 1 s of idle

In fidelity.py's table the kernels-* rows' first run at S=4096 read 10–17% slow. There each
first run follows the previous row's sustained replays. Here the first run is the process's
first GPU work (`plain`: its warm-up compiles and autotunes the Triton kernel), or follows one
call of the kernel made outside the run; the two runs after it show the steady figure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks.shapes import SHAPES
from profiling.run import runner
from profiling.run.runner import run
from profiling.workload.spec import Workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["plain", "hot", "settle"])
    parser.add_argument("--variant", default="kernels-flash-attn2")
    args = parser.parse_args()
    config = Workload.from_user(variant=args.variant, device="cuda", **SHAPES["long"]).validated()
    if args.mode != "plain":
        problem = config.problem("cuda")
        t = runner._inputs(config, "cuda", config.spec.layout)
        built = config.spec.build(problem)
        began = time.perf_counter()
        with torch.no_grad(), config.spec.context():
            built.forward(t["q"], t["k"], t["v"])
        torch.cuda.synchronize()
        print(f"{args.mode}: one call outside the run took {time.perf_counter() - began:.2f} s")
        if args.mode == "settle":
            time.sleep(1.0)
    began = time.perf_counter()
    first = run(config).summary.gpu_us_per_forward
    took = time.perf_counter() - began
    after = [run(config).summary.gpu_us_per_forward for _ in range(2)]
    print(f"{args.mode}: first run {took:.1f} s, {first:.1f} µs/forward on the GPU; "
          f"the next two {after[0]:.1f}, {after[1]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
