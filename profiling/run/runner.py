"""One profiled run, the way the post's scripts do it: inputs, warm-up, profile, export.

This is the only module that starts torch.profiler. A process-wide lock keeps one run at a time
(two profilers cannot run at once, and two runs would share one GPU's timings). It returns
plain, picklable data — paths, DataFrames, a Summary, the trace read once (run_trace) — so it
can cross a ZeroGPU worker boundary.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import shutil
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from concurrent import futures
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from attention import Built, Problem, VariantUnavailable
from attention.sdpa_reasons import first_line
from profiling.run import counters as collect
from profiling.run import cpu_memory, memory_record, training
from profiling.run import timing as timing_modes
from profiling.run.clocks import Clocks, Sampler
from profiling.run.export import export, write_run_json
from profiling.run.reference.check import relative_error
from profiling.run.reference.grad import gradient_errors
from profiling.run.result import Checks, Measured, ProfileResult, build_result
from profiling.workload.availability import error_text
from profiling.workload.memory import check_memory
from profiling.workload.spec import (
    WAIT,
    WARMUP,
    ConfigError,
    Workload,
    check_timing,
    resolve_device,
)

Progress = Callable[[float, str], None]
log = logging.getLogger(__name__)
_LOCK = threading.Lock()
RUN_LOCK = _LOCK  # one profiler at a time, the model runs too (profiling/run/model/runner.py)
SEED = 0


KINETO_LOG_LEVEL = "KINETO_LOG_LEVEL"
KINETO_QUIET = "6"  # above kineto's ERROR (4) and USDT (5): its profiler_start/stop lines too


def quiet_profiler_logs(verbose: bool = False) -> None:
    """Hide the profiler's own C++ chatter (kineto's USDT/STAGE lines on stderr) unless asked
    for, or unless the user set KINETO_LOG_LEVEL; kineto reads it when its first profiler starts."""
    if not verbose:
        os.environ.setdefault(KINETO_LOG_LEVEL, KINETO_QUIET)


def prime_profiler() -> None:
    """Start one tiny CPU-only profiler on this (the main) thread. Kineto inits torch's client
    on the thread of a process's first profiler and complains ("External init callback must run
    in same thread as registerClient") when that is not the one that imported torch: the app's
    handlers run on worker threads, so its first click would print that."""
    with _LOCK, profile(activities=[ProfilerActivity.CPU]):
        torch.zeros(1).add_(1)


class RunError(RuntimeError):
    """The run started but failed (OOM, a kernel error, a build that does not load): the message
    names the error's class; the traceback is in the log; memory has been released."""


def run(
    workload: Workload,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    step_memory: bool = False,
    counter_seconds: float = collect.PASS_SECONDS,
) -> ProfileResult:
    """Validate, then profile `workload` once; raises ConfigError, VariantUnavailable or
    RunError. `step_memory`: on a CPU, one more step measures what a step allocates
    (ProfileResult.step_peak_bytes; the Sweep's memory chart asks, a Profile click need not).
    `counter_seconds`: what its counter pass may take (a Compare's share of its job's bound:
    profiling.run.counters.pass_seconds)."""
    workload = workload.validated()
    report = progress or (lambda fraction, text: None)
    with _LOCK:
        return _run_locked(workload, out_dir, report, step_memory, counter_seconds)


def _run_locked(
    workload: Workload,
    out_dir: str | Path | None,
    report: Progress,
    step_memory: bool = False,
    counter_seconds: float = collect.PASS_SECONDS,
) -> ProfileResult:
    began = time.perf_counter()
    device = resolve_device(workload.device)
    check_timing(workload.timing, device)
    variant = workload.spec
    try:
        reason = variant.unavailable(device, workload.torch_dtype)
        if not reason and workload.needs_grad:
            reason = variant.backward_unavailable(device, workload.torch_dtype)
    except Exception as exc:  # the check itself broke: no verdict, a failure
        log.exception("availability check failed: %s", workload)
        raise RunError(
            f"{variant.id} failed on {device}: availability could not be checked: "
            f"{_failure_text(exc)}"
        ) from None
    if reason:
        raise VariantUnavailable(f"{variant.id} is unavailable here: {reason}")
    spare = check_memory(workload, device)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="attnprof-"))
    out.mkdir(parents=True, exist_ok=True)
    problem = workload.problem(device)
    failure: Exception | None = None
    try:
        result = _attempt(workload, variant, problem, device, out, report, spare, step_memory)
    except torch.OutOfMemoryError:
        failure = RunError(
            f"out of memory on {device} for {workload.variant} at {workload.shape_text()}: "
            "memory was released; reduce seq_len, batch or heads"
        )
    except VariantUnavailable as exc:  # a known rule: the variant cannot run this here
        failure = VariantUnavailable(_unavailable_text(workload.variant, exc))
    except Exception as exc:  # anything else is a failure: said as one, keep the app alive
        log.exception("run failed: %s", workload)
        traceback.clear_frames(exc.__traceback__)  # a kept log record must not hold the tensors
        failure = RunError(f"{workload.variant} failed on {device}: {_failure_text(exc)}")
    if failure is not None:
        # Raised here, outside the except blocks, so no traceback keeps the frames (and their
        # tensors) alive: memory really returns before the caller sees the error.
        _release(device, collect=True)
        if out_dir is None:  # our own folder holds nothing worth keeping from a failed run
            shutil.rmtree(out, ignore_errors=True)
        raise failure
    result.seconds = time.perf_counter() - began
    if workload.counters:
        report(0.95, "measuring hardware counters under Nsight Compute (a second process)")
        _release(device, collect=True)  # the child needs the memory this run held
        result.counters = collect.measure({**workload.as_dict(), "device": device}, device, out,
                                          budget_s=counter_seconds)  # fmt: skip
    report(1.0, "done")
    return result


def _attempt(
    workload, variant, problem: Problem, device: str, out: Path, report, spare: int,
    step_memory: bool = False,
) -> ProfileResult:  # fmt: skip
    report(0.05, "allocating inputs")
    tensors = _inputs(workload, device, variant.layout)
    built = variant.build(problem)  # raises VariantUnavailable where a known rule refuses
    report(0.15, f"warm-up ({variant.warmup_calls} calls)")
    profiler, measured = _profile(workload, built, variant, tensors, device, report)
    peak = torch.cuda.max_memory_allocated() / 1024**2 if device == "cuda" else None
    if device == "cuda":
        report(0.6, "recording the allocator's history over one step")
        step = training.measured_step(workload, built.forward)
        with training.grad_mode(workload), variant.context():
            recorded = memory_record.record(workload, step, tensors, out, workload.tag(device))
        measured.memory_file, measured.memory, measured.timeline = recorded
    elif step_memory:  # no allocator statistics on a CPU: the profiler's memory records
        report(0.6, "measuring what one step allocates")
        with training.grad_mode(workload), variant.context():
            step = training.measured_step(workload, built.forward)
            measured.step_peak_bytes = cpu_memory.step_peak_bytes(step, tensors)
    explained = None
    if built.explain is not None:  # SDPA: its checks of each backend and its pick
        explained = _explained(built, variant, tensors)
    saved = None
    if workload.needs_grad:
        report(0.65, "measuring what the forward saves for backward")
        with variant.context():
            saved = training.saved_for_backward(workload, built.forward, tensors)
    report(0.7, "exporting the trace")
    paths = export(profiler, workload, device, out)
    try:
        report(0.8, "reference check in float64, parsing the trace")
        # The reference's GPU work is queued first and read last, so it runs while the CPU
        # parses.
        reference = relative_error(tensors, workload, variant.layout, device, spare)
        gradients = None
        if workload.needs_grad:
            gradients = gradient_errors(tensors, workload, variant.layout, device)
        checks = Checks(reference, gradients, saved, explained, measured)
        result = build_result(workload, built, profiler, paths, peak, checks, device)
        write_run_json(result)
    finally:
        futures.wait([paths.gz_written])  # no writer left behind in a folder about to go
    try:
        paths.gz_written.result()
    except OSError as exc:  # a full disk: a failed run, cleaned up like one
        raise RunError(f"writing {paths.gz.name} failed: {exc.strerror or exc}") from None
    return result


def _explained(built: Built, variant, tensors: dict) -> dict[str, Any]:
    """The library's own account of its choice (advisory: asking it must not fail the run
    that already ran; an error is said in its place and logged)."""
    try:
        with variant.context():
            return built.explain(*(tensors[name].detach() for name in training.INPUTS))
    except Exception as exc:  # torch's private helpers may change between versions
        log.warning("could not ask %s for its reasons", variant.id, exc_info=True)
        traceback.clear_frames(exc.__traceback__)
        return {"checks": [], "chosen": f"unknown ({_failure_text(exc)})"}


def _inputs(workload: Workload, device: str, layout: str) -> dict[str, torch.Tensor]:
    """Fixed-seed q, k, v in the variant's layout, as the post's scripts create them: q (and
    the output) with q_len queries and every head, k and v with the keys and their K/V heads
    (and, for a run with a backward, the output's gradient, and q, k, v requiring theirs)."""
    generator = torch.Generator(device=device).manual_seed(SEED)
    names = ("q", "k", "v", "grad_out") if workload.needs_grad else ("q", "k", "v")
    tensors = {}
    for name in names:
        tensors[name] = torch.randn(
            workload.tensor_shape(name, layout),
            generator=generator,
            device=device,
            dtype=workload.torch_dtype,
        )
    if workload.needs_grad:
        for name in training.INPUTS:
            tensors[name].requires_grad_(True)
    return tensors


def _profile(workload, built: Built, variant, tensors: dict, device: str, report: Progress):
    """The warm-up steps, the timing mode's preparation (a graph's capture), then the post's
    profiler schedule with the GPU's clocks sampled; the output stays in `tensors`."""
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    step = training.measured_step(workload, built.forward)
    with training.grad_mode(workload), variant.context():
        _warm_up(workload, variant, step, tensors, sync)
        timed = timing_modes.prepare(workload, built.forward, step, tensors, device)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        report(0.3, f"profiling {workload.total_steps} steps ({workload.steps} active)")
        with (
            Sampler(_bus_id(device)) as sampler,
            profile(
                activities=activities,
                schedule=schedule(wait=WAIT, warmup=WARMUP, active=workload.steps, repeat=1),
                record_shapes=False,
                profile_memory=False,
                with_stack=False,
            ) as profiler,
        ):
            for _ in range(workload.total_steps):
                timed.step(tensors)
                profiler.step()
            sync()
        timed.finish(tensors)
    return profiler, _measured(timed, sampler.clocks)


def _measured(timed: timing_modes.Timed, clocks: Clocks) -> Measured:
    """What the timing mode and the sampler add to the run (the graphs are let go here)."""
    return Measured(notes=timed.notes, compared=timed.compared, clocks=clocks)


def _bus_id(device: str) -> str | None:
    """The GPU's PCI bus id, as NVML names it (None on a CPU: nothing to sample)."""
    if device != "cuda":
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    domain = getattr(props, "pci_domain_id", 0)
    return f"{domain:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


def _warm_up(workload, variant, step: Callable[[dict], None], tensors: dict, sync) -> None:
    """The variant's warm-up steps; a library refusing this input by its own rule (SDPA's
    pinned backends) makes the variant unavailable, with its warnings as the reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for _ in range(variant.warmup_calls):
                step(tensors)
            sync()
        except RuntimeError as exc:
            if isinstance(exc, torch.OutOfMemoryError) or not variant.declines(exc):
                raise  # a failure, not the library refusing this input
            hints = "; ".join(torch_reasons(str(w.message) for w in caught))
            detail = f" ({hints})" if hints else ""
            raise VariantUnavailable(
                f"{variant.id} cannot run {workload.shape_text()} here: "
                f"{str(exc).splitlines()[0]}{detail}"
            ) from exc


NOISE = ("has been runtime disabled", "kernel not used because:")  # another backend pinned off


def torch_reasons(messages: Iterable[str]) -> list[str]:
    """torch's reasons for refusing, each once: the first line of each warning, without its
    "(Triggered internally at …cpp)" locations and without the lines that only say a backend
    was pinned off (SDPA warns of every backend it did not try)."""
    reasons = [first_line(message) for message in messages]
    return list(dict.fromkeys(r for r in reasons if r and not r.rstrip(".").endswith(NOISE)))


def _unavailable_text(variant: str, exc: VariantUnavailable) -> str:
    """The rule's words, naming the variant once (a loader's message does not name it)."""
    text = str(exc)
    return text if text.startswith(f"{variant} ") else f"{variant} is unavailable here: {text}"


def _failure_text(exc: Exception) -> str:
    """The error's class and first line (ours, RunError, is already worded for the user)."""
    if isinstance(exc, RunError):
        return str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return error_text(exc)


def _release(device: str, collect: bool) -> None:
    """After an OOM: drop every reference (a collection pass) and hand cached blocks back."""
    if collect:
        gc.collect()
    if device == "cuda":
        with contextlib.suppress(RuntimeError):
            torch.cuda.synchronize()
        torch.cuda.empty_cache()


__all__ = ["ConfigError", "ProfileResult", "RunError", "VariantUnavailable", "run"]
