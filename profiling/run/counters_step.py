"""The counter pass's child: one measured step of a workload inside the NVTX range ncu profiles.

Run as `python -m profiling.run.counters_step '<workload JSON>'` under ncu (profiling.run.counters).
The step is the profiled run's (training.measured_step, the runner's inputs), run eagerly after
the variant's warm-up steps, so compiled or autotuned code is not what ncu sees.
"""

from __future__ import annotations

import json
import sys

import torch

from profiling.run import training
from profiling.run.counters import RANGE
from profiling.run.runner import _inputs
from profiling.workload.spec import Workload


def main(argv: list[str]) -> int:
    """One warmed-up measured step inside RANGE; prints what ran."""
    workload = Workload.from_user(**{**json.loads(argv[0]), "counters": False}).validated()
    variant = workload.spec
    tensors = _inputs(workload, "cuda", variant.layout)
    built = variant.build(workload.problem("cuda"))
    step = training.measured_step(workload, built.forward)
    with training.grad_mode(workload), variant.context():
        for _ in range(max(variant.warmup_calls, 1)):
            step(tensors)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(RANGE)
        step(tensors)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    print(f"measured one step of {workload.variant} at {workload.shape_text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
