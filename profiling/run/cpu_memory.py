"""What one step of a CPU run allocated, measured.

A CPU has no `torch.cuda.max_memory_allocated`, but with `profile_memory=True` torch.profiler
records every allocation and free of the CPU allocator made while it runs ("[memory]" records,
bytes signed). Their running sum over one step, in time order, peaks at the bytes the step held
at once beyond what was alive before it: naive's S² scores and probabilities, a fused kernel's
blocks. Issue 31: the Sweep's memory chart on a CPU drew only the estimate, where a fixed
workspace and the float64 check hid that difference (naive 73.1 MiB, flash 73).

Its own short profiler, after the run's (two profilers cannot overlap): the run's trace keeps
no memory records, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.profiler import ProfilerActivity, profile

MEMORY_RECORD = "[memory]"
OUTPUTS = ("out", "dq", "dk", "dv")  # what a step leaves in `tensors` (training.measured_step)


def step_peak_bytes(step: Callable[[dict], None], tensors: dict) -> int:
    """The most bytes one `step(tensors)` held at once beyond what was alive before it. The
    previous step's output and gradients are let go first (the step makes its own): a block
    the profiler did not see allocated would be freed inside it, and c10 warns of each."""
    for name in OUTPUTS:
        tensors.pop(name, None)
    for tensor in tensors.values():
        tensor.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        step(tensors)
    records = (
        (event.start_ns(), event.nbytes())
        for event in profiler.profiler.kineto_results.events()
        if event.name() == MEMORY_RECORD and event.device_type() == torch.autograd.DeviceType.CPU
    )
    return running_peak(records)


def running_peak(records: Iterable[tuple[int, int]]) -> int:
    """The highest running sum of (time, signed bytes) records taken in time order (0 when
    nothing was allocated)."""
    held = peak = 0
    for _, size in sorted(records):
        held += size
        peak = max(peak, held)
    return peak
