"""How the measured steps are timed (issue 23): launched eagerly, replayed as CUDA graphs, or
each after an L2 flush. The runner asks `prepare` for the step its profiler loop calls.

- `cuda-graph`: each phase of the step (the forward; the backward) is captured once as a CUDA
  graph after the warm-up (the forward's and the backward's graphs share one memory pool, as
  torch.cuda.make_graphed_callables does) and replayed under the phase's own span, so the CPU
  launch cost shrinks to one cudaGraphLaunch per phase. The trace still shows every kernel the
  replay ran (CUPTI records them, linked to that launch), so the per-step figures and kernel
  table hold; what it cannot show is the CPU side inside a graph: no aten ops, no per-kernel
  launches, and so no launch → kernel delay per kernel. A variant whose step cannot be captured
  (a host sync, a CPU-side decision, an allocation the capture forbids) is unavailable, with
  torch's reason.
- `cold-l2`: before each step a buffer larger than the L2 is written (`L2_FLUSH` span), so every
  step reads its inputs from HBM. The flush runs outside the measured windows: no figure counts
  it.

Beside a graph run the step is also timed without the profiler, eager then replayed, on the
host (the time to issue one step) and on the GPU's clock (events around back-to-back steps):
the "cost moved to the CPU" as two numbers side by side.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.profiler import record_function

from attention import Forward, VariantUnavailable
from attention.sdpa_reasons import first_line
from profiling.analysis.spread import spread
from profiling.run import training
from profiling.vocabulary import BACKWARD, FORWARD, L2_FLUSH, STEP
from profiling.workload.spec import Workload

Step = Callable[[dict], None]
FLUSH_MIN_BYTES = 256 * 1024**2  # triton.testing.do_bench's flush buffer
SIDE_WARMUP = 3  # torch's recipe: a few steps on a side stream before capturing
COMPARE_STEPS = 20  # eager and replayed steps timed for the side-by-side


@dataclass
class Timed:
    """The step the profiler loop calls, and what the mode adds to the run's summary."""

    step: Step
    finish: Callable[[dict], None] = lambda tensors: None  # leaves the outputs in `tensors`
    notes: list[str] = field(default_factory=list)
    compared: dict[str, Any] | None = None  # eager vs graph, timed without the profiler
    keep: list[Any] = field(default_factory=list, repr=False)  # graphs, the flush buffer


def prepare(workload: Workload, forward: Forward, step: Step, tensors: dict, device: str) -> Timed:
    """The measured step for the workload's timing, after the eager warm-up has run."""
    if workload.timing == "cuda-graph":
        return _graphed(workload, forward, step, tensors)
    if workload.timing == "cold-l2":
        return _cold(step, device)
    return Timed(step)


# -- cold L2 -----------------------------------------------------------------------------------
def flush_bytes(device: str) -> int:
    """Bytes written to evict the L2: four times its size, at least do_bench's 256 MiB."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    return max(4 * int(l2), FLUSH_MIN_BYTES)


def _cold(step: Step, device: str) -> Timed:
    size = flush_bytes(device)
    buffer = torch.empty(size, dtype=torch.uint8, device=device)

    def cold_step(tensors: dict) -> None:
        with record_function(L2_FLUSH):
            buffer.zero_()
        step(tensors)

    note = (
        f"cold L2: {size / 1024**2:,.0f} MiB written before each step ({L2_FLUSH} span, "
        "excluded from every figure)"
    )
    return Timed(cold_step, notes=[note], keep=[buffer])


# -- CUDA graphs -------------------------------------------------------------------------------
def _graphed(workload: Workload, forward: Forward, step: Step, tensors: dict) -> Timed:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(SIDE_WARMUP):
            step(tensors)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        graphs, outputs = _capture(workload, forward, tensors)
    except VariantUnavailable:
        raise
    except RuntimeError as exc:
        if isinstance(exc, torch.OutOfMemoryError):
            raise
        with contextlib.suppress(RuntimeError):
            torch.cuda.synchronize()
        raise VariantUnavailable(
            f"{workload.variant} cannot be captured as a CUDA graph: {first_line(str(exc))}"
        ) from None
    replay = _replayer(workload, graphs)

    def finish(kept: dict) -> None:
        kept.update(outputs)

    compared = compare_launches(step, replay, tensors)
    finish(tensors)
    note = (
        "CUDA graph: each phase replayed as one cudaGraphLaunch; the trace shows its kernels, "
        "linked to that launch, but no CPU op inside the graph (no aten op, so no SDPA backend "
        "op either: read the kernel names), no per-kernel launch and no graph node ids"
    )
    return Timed(replay, finish, [note], compared, keep=graphs)


def _capture(workload: Workload, forward: Forward, tensors: dict):
    """The step's phases captured: [forward] or [forward, backward], one memory pool."""
    inputs = [tensors[name] for name in training.INPUTS]
    if not workload.needs_grad:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = forward(*inputs)
        return [graph], {"out": out}
    for tensor in inputs:
        tensor.grad = None
    forward_graph, backward_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(forward_graph):
        out = forward(*inputs)
    if not out.requires_grad:
        raise VariantUnavailable(
            f"{workload.variant}'s forward returned an output without a gradient: what it "
            "ran has no backward"
        )
    with torch.cuda.graph(backward_graph, pool=forward_graph.pool()):
        out.backward(tensors["grad_out"])
    outputs = {"out": out.detach()}
    outputs |= {training.GRADIENTS[name]: tensors[name].grad for name in training.INPUTS}
    return [forward_graph, backward_graph], outputs


def _replayer(workload: Workload, graphs: list) -> Step:
    """A replay with the spans the eager step has (the trace readers need no other rule)."""
    if workload.mode == "forward":

        def replay_forward(tensors: dict) -> None:
            with record_function(FORWARD):
                graphs[0].replay()

        return replay_forward
    forward_graph, backward_graph = graphs
    train = workload.mode == "train"

    def replay_step(tensors: dict) -> None:
        with record_function(STEP) if train else contextlib.nullcontext():
            with record_function(FORWARD) if train else contextlib.nullcontext():
                forward_graph.replay()
            with record_function(BACKWARD):
                backward_graph.replay()

    return replay_step


def compare_launches(eager: Step, replay: Step, tensors: dict) -> dict[str, Any]:
    """Eager vs replayed, without the profiler: host µs to issue one step (median, IQR) and
    GPU-clock µs per step over back-to-back steps."""
    return {"eager": _timed(eager, tensors), "cuda-graph": _timed(replay, tensors)}


def _timed(step: Step, tensors: dict, count: int = COMPARE_STEPS) -> dict[str, Any]:
    torch.cuda.synchronize()
    host = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        began = time.perf_counter()
        step(tensors)
        host.append((time.perf_counter() - began) * 1e6)
    end.record()
    torch.cuda.synchronize()
    return {"host_us": spread(host), "wall_us": start.elapsed_time(end) * 1e3 / count}
