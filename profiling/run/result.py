"""A profiled run's result: the figures read off its trace (once), torch's operator table and
what the run measured beside it, gathered into the Summary the page, the API and the CLI show.

profiling.run.runner runs; this module only reads what the run left (the trace file, the profiler's
key_averages, the checks' queued results). Plain, picklable data comes out (ProfileResult), so
it crosses a ZeroGPU worker boundary.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from attention import Built
from attention.masks import BOTTOM_RIGHT
from attention.sdpa_reasons import NAMES
from profiling.analysis.bounds import run_bound
from profiling.analysis.memory_timeline import Timeline
from profiling.analysis.spread import large_spread_note, step_spread
from profiling.analysis.summary import ForwardStats, Summary, flops_convention
from profiling.run import trace as run_trace
from profiling.run import training
from profiling.run.clocks import Clocks
from profiling.run.export import operator_table
from profiling.run.trace import RunTrace
from profiling.workload.spec import Workload


@dataclass
class ProfileResult:
    config: Workload
    summary: Summary
    operators: pd.DataFrame  # from key_averages
    kernels: pd.DataFrame  # per kernel name, per forward, from the trace
    trace_json: Path
    trace_gz: Path
    table_txt: Path
    # the trace, read once in the run: the page's launch statistics and Gantt and Compare's
    # row come from it, outside the run (and outside a ZeroGPU slot), with no second read
    trace: RunTrace = field(repr=False)
    seconds: float = 0.0
    # issue 23: the allocator's snapshot of one step (memory_viz's .pickle) and its timeline,
    # the GPU's clock samples, and the run's figures as JSON beside the trace
    memory_snapshot: Path | None = None
    memory_timeline: Timeline | None = field(default=None, repr=False)
    clocks: Clocks | None = field(default=None, repr=False)
    run_json: Path | None = None
    # a CPU run: the most one step held at once beyond its inputs (profiling/run/cpu_memory.py)
    step_peak_bytes: int | None = None
    # issue 36: the counter pass's per-kernel figures, or why there are none (Counters)
    counters: Any = field(default=None, repr=False)


@dataclass
class Measured:
    """What the timing mode, the clock sampler and the allocator's history add to a run."""

    notes: list[str] = field(default_factory=list)
    compared: dict[str, Any] | None = None  # eager vs cuda-graph, timed without the profiler
    clocks: Clocks | None = None
    memory_file: Path | None = None
    memory: dict[str, Any] | None = None
    timeline: Timeline | None = None
    step_peak_bytes: int | None = None  # a CPU run: what one step allocated (run/cpu_memory.py)


@dataclass
class Checks:
    """What the run measured beside its trace: the output's error (queued), the gradients'
    (queued, with a backward) and the tensors its forward saves for backward."""

    output: Callable[[], tuple[float, str]]
    gradients: Callable[[], tuple[dict[str, float], str]] | None
    saved: list[training.SavedTensor] | None
    backends: dict[str, Any] | None = None  # SDPA's checks of each backend and its pick
    measured: Measured = field(default_factory=Measured)


def build_result(
    workload: Workload, built: Built, profiler, paths, peak, checks: Checks, device: str
) -> ProfileResult:
    """The run's figures: its trace read once, key_averages, the reference's errors."""
    trace = run_trace.read(paths.json, workload.measured, workload.phases)
    stats = trace.stats
    ran = workload.spec.ran(built, stats.backend)  # declared, or read from the backend seen
    operators = operator_table(profiler, device)
    rel_err, rel_note = checks.output()
    grad_err, grad_note = checks.gradients() if checks.gradients else (None, "")
    measured = checks.measured
    spread = step_spread(stats.cpu_us_each, stats.gpu_us_each if device == "cuda" else None)
    clocks = measured.clocks.summary() if measured.clocks else None
    notes = _notes(workload, built, stats, checks.backends or {})
    notes += _timing_notes(measured, spread, clocks, workload)
    summary = Summary(
        variant=workload.variant,
        label=workload.spec.label,
        config=workload.as_dict(),
        device=device,
        device_name=device_name(device),
        torch_version=torch.__version__,
        ran=ran,
        forwards=stats.forwards,
        **_gpu_figures(stats, device),
        cpu_us_per_forward=stats.cpu_us,
        cpu_us_range=list(stats.cpu_us_range or ()),
        peak_mib=peak if device == "cuda" else None,
        **_rate(stats, workload.flops, workload, device),
        rel_err=rel_err,
        rel_err_note=rel_note,
        dominant_kernel=stats.dominant,
        dominant_decoded=stats.dominant_decoded,
        notes=notes,
        mode=workload.mode,
        phases=_phase_rows(trace, workload, device),
        grad_err=grad_err,
        grad_err_note=grad_note,
        saved=[asdict(row) for row in checks.saved] if checks.saved is not None else None,
        saved_extra_bytes=training.kept_beyond_inputs(checks.saved) if checks.saved else None,
        **_roofline(workload, stats, device),
        sdpa_backends=checks.backends,
        **_timing_fields(workload, measured, spread, clocks),
        machine=machine(device),
    )
    return ProfileResult(
        config=workload,
        summary=summary,
        operators=operators,
        kernels=trace.kernels,
        trace_json=paths.json,
        trace_gz=paths.gz,
        table_txt=paths.txt,
        trace=trace,
        memory_snapshot=measured.memory_file,
        memory_timeline=measured.timeline,
        clocks=measured.clocks,
        step_peak_bytes=measured.step_peak_bytes,
    )


def _timing_fields(workload: Workload, measured: Measured, spread: dict, clocks) -> dict:
    """The Summary's issue-23 fields: timing mode, spread, eager vs graph, clocks, memory."""
    return {"timing": workload.timing, "step_spread": spread, "launch_compare": measured.compared,
            "gpu_clocks": clocks, "memory": measured.memory}  # fmt: skip


def _notes(workload: Workload, built: Built, stats: ForwardStats, backends: dict) -> list[str]:
    """The variant's note, the bottom-right mask, SDPA's pick against the trace, missing spans."""
    notes = [n for n in (built.note,) if n]
    if workload.causal and workload.queries < workload.seq_len:
        notes.append(BOTTOM_RIGHT)
    picked = backends.get("chosen")
    if picked in NAMES.values() and stats.backend and picked not in stats.backend:
        notes.append(f"SDPA picks {picked} for these inputs, but the trace shows {stats.backend}")
    if stats.forwards != workload.steps:
        notes.append(
            f"expected {workload.steps} {workload.measured} spans in the trace, found "
            f"{stats.forwards}"
        )
    return notes


def _timing_notes(
    measured: Measured, spread: dict, clocks: dict | None, workload: Workload
) -> list[str]:
    """The timing mode's own notes, a large spread, a clock that dropped or was throttled."""
    per = {"forward": "forward", "backward": "backward", "train": "step"}[workload.mode]
    notes = list(measured.notes)
    wide = large_spread_note(spread, per)
    if wide:
        notes.append(wide)
    if clocks and clocks.get("warning"):
        notes.append(f"GPU clocks: {clocks['warning']}")
    if measured.memory and measured.memory.get("error"):
        notes.append(f"memory timeline unavailable: {measured.memory['error']}")
    return notes


def _rate(stats: ForwardStats, flops: float, workload: Workload, device: str) -> dict[str, Any]:
    """TFLOP/s of `flops` over the step's GPU time (its CPU time on a CPU), and the basis."""
    square = workload.q_len is None and workload.window is None
    convention = flops_convention(workload.causal, workload.mode, square)
    if device == "cuda" and stats.gpu_us:
        tflops = flops / (stats.gpu_us * 1e-6) / 1e12
        basis = f"GPU time; {convention}"
    else:
        tflops = flops / (stats.cpu_us * 1e-6) / 1e12 if stats.cpu_us > 0 else None
        basis = f"CPU time of {workload.measured} (no GPU); {convention}"
    return {"flops_per_forward": flops, "tflops": tflops, "tflops_basis": basis}


def _roofline(workload: Workload, stats: ForwardStats, device: str) -> dict[str, Any]:
    """The run's place on the device's roofline: bytes that must move, TB/s, % of peaks."""
    gpu_us = stats.gpu_us if device == "cuda" else None
    name = torch.cuda.get_device_name() if device == "cuda" else ""
    found = run_bound(
        workload.flops, workload.io_bytes, workload.mode, gpu_us, name, workload.dtype
    )
    return {
        "bytes_moved": found.bytes_moved,
        "intensity": found.intensity,
        "tbps": found.tbps,
        "pct_peak_tflops": found.pct_peak_tflops,
        "pct_peak_bandwidth": found.pct_peak_bandwidth,
        "roofline_bound": found.bound,
    }


def _phase_rows(trace: RunTrace, workload: Workload, device: str) -> list[dict[str, Any]]:
    """Each phase's figures per step (a forward run has one: its own)."""
    rows = []
    for name, phase in trace.phases.items():
        rate = _rate(phase.stats, workload.phase_flops(name), workload, device)
        rows.append(
            {
                "phase": name,
                **_gpu_figures(phase.stats, device),
                "cpu_us": phase.stats.cpu_us,
                "tflops": rate["tflops"],
                "flops": rate["flops_per_forward"],
                "dominant_kernel": phase.stats.dominant,
                "dominant_decoded": phase.stats.dominant_decoded,
                "spread": step_spread(
                    phase.stats.cpu_us_each,
                    phase.stats.gpu_us_each if device == "cuda" else None,
                ),
            }
        )
    return rows


def _gpu_figures(stats: ForwardStats, device: str) -> dict[str, Any]:
    """The Summary's GPU figures, decided here once: a CPU run has no kernels, copies or GPU
    time, so each is None (not 0.0), which the page, the CLI and JSON read as "n/a"."""
    on_gpu = device == "cuda"
    gpu_us = stats.gpu_us if on_gpu else None
    return {
        "kernels_per_forward": stats.kernels if on_gpu else None,
        "memcpy_per_forward": stats.memcpy if on_gpu else None,
        "memset_per_forward": stats.memset if on_gpu else None,
        "gpu_us_per_forward": gpu_us,
        "cpu_bound": (stats.cpu_us > gpu_us) if gpu_us else None,
    }


def machine(device: str) -> dict[str, Any]:
    """What the run store keeps of the machine beside the run's figures (issue 34; a model
    run's too, issue 43)."""
    found: dict[str, Any] = {
        "cuda_version": torch.version.cuda,
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "triton_version": _installed("triton") or _installed("pytorch-triton"),
        "driver_version": None, "compute_capability": None, "device_memory_gib": None,
    }  # fmt: skip
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        found["compute_capability"] = f"{props.major}.{props.minor}"
        found["device_memory_gib"] = props.total_memory / 2**30
        found["driver_version"] = _driver_version()
    return found


@functools.cache  # importlib.metadata scans sys.path (~10 ms): once per process
def _installed(package: str) -> str | None:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version(package)
    return None


@functools.cache  # the driver does not change under a running process
def _driver_version() -> str | None:
    """The NVIDIA driver's version through NVML (nvidia-ml-py), None where it cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver, no permission: the row says NULL
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's ("CPU · <model name>"), as History lists it."""
    return torch.cuda.get_device_name() if device == "cuda" else _cpu_name()


def _cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return "CPU · " + line.split(":", 1)[1].strip()
    return "CPU"
