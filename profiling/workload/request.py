"""A Compare or Sweep as asked by the page or its API: checked once into a list of workloads.

Every value an API caller sends is checked here again (types, how many variants and points,
the page's ranges, the CPU budget of a run and of the whole job), because a component's own
check stops only what the page itself can send. Each workload is built by
`Workload.from_user`, so the per-run rules are the Profile tab's; what is added here is what
only a list has. Also the GPU slot a request asks for (ZeroGPU's `duration`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from profiling.workload.availability import unavailable_reasons
from profiling.workload.spec import (
    CPU_MAX_FLOPS,
    LIMITS,
    ConfigError,
    Workload,
    check_cpu_budget,
    check_page_ranges,
    check_typed_ranges,
    device_key,
    known_variants,
    page_ranges,
    shape_from_user,
    show,
    within_cpu_budget,
)

# -- limits (README's "Limits" section quotes these) -------------------------------------------
MAX_COMPARE_VARIANTS = {"cuda": 10, "cpu": 6}  # per Compare: the post's six + Hub variants fit
MAX_SWEEP_VARIANTS = {"cuda": 4, "cpu": 3}
MAX_SWEEP_LENGTHS = 8
MAX_ENTRIES = 64  # list entries read at all, duplicates included (an API call can send 10⁶)
MAX_SWEEP_POINTS = {"cuda": 24, "cpu": 12}  # variants × lengths
CPU_MAX_JOB_FLOPS = 4 * CPU_MAX_FLOPS  # per forward, summed over a job's runs (CPU only)
# @spaces.GPU duration of one Profile run; compiled / Hub variants compile or download inside
# the slot and get more.
GPU_SECONDS = 60
GPU_SECONDS_SLOW = 150
# ... of a Compare/Sweep: a base for start-up, plus per run a warm eager run, plus the slow
# first run of each compiled/Hub variant; generous against the H200's jobs (docs/performance.md).
GPU_SECONDS_JOB = 30
GPU_SECONDS_PER_RUN = 6
GPU_SECONDS_JOB_MAX = 300  # ZeroGPU refuses durations beyond a few minutes


DEFAULT_START, DEFAULT_STOP = 256, 16384  # a sweep's lengths: 256 doubling to 16384


def doubling(start: int = DEFAULT_START, stop: int = DEFAULT_STOP) -> list[int]:
    """start, 2·start, … up to stop (inclusive), within the seq_len limits."""
    low, high = LIMITS["seq_len"]
    length, lengths = max(start, low), []
    while length <= min(stop, high):
        lengths.append(length)
        length *= 2
    return lengths


# Lengths a sweep may ask for: 256 doubling to 16384 on a GPU, to the CPU range's end on a CPU.
SWEEP_LENGTHS = {"cuda": doubling(256, 16384), "cpu": doubling(256, 4096)}


def sweep_lengths(device: str) -> list[int]:
    return list(SWEEP_LENGTHS[device_key(device)])


@dataclass(frozen=True)
class JobRequest:
    """A validated Compare or Sweep: what the GPU function receives (plain, picklable).

    `workloads` is every run the job makes, in order (a sweep's variant by variant, each over
    its lengths); `seq_lens` is a sweep's length axis (empty for a Compare)."""

    workloads: list[Workload]
    seq_lens: list[int] = field(default_factory=list)
    gpu_seconds: int = GPU_SECONDS_JOB

    @property
    def variants(self) -> list[str]:
        return list(dict.fromkeys(w.variant for w in self.workloads))


def variant_ids(raw: Any, *, what: str, limit: int) -> list[str]:
    """A list of known variant ids, duplicates dropped, or a ConfigError saying what is wrong."""
    if raw is None or (isinstance(raw, list | tuple) and not raw):
        raise ConfigError(f"pick at least one variant to {what}")
    if not isinstance(raw, list | tuple) or not all(isinstance(v, str) for v in raw):
        raise ConfigError(
            f'variants must be a list of variant ids, e.g. ["naive", "sdpa-flash"]; got {show(raw)}'
        )
    if len(raw) > MAX_ENTRIES:
        raise ConfigError(f"variants: at most {MAX_ENTRIES} entries, got {len(raw):,}")
    names = list(dict.fromkeys(v.strip() for v in raw))
    if len(names) > limit:
        raise ConfigError(f"at most {limit} variants per {what} on this machine, got {len(names)}")
    return known_variants(names)


def seq_len_list(raw: Any, device: str) -> list[int]:
    """Sorted distinct lengths, each one of the page's choices (256 doubling to the top)."""
    low, high, _ = page_ranges(device)["seq_len"]
    offered = sweep_lengths(device)
    example = "e.g. [256, 512, 1024]"
    if raw is None or (isinstance(raw, list | tuple) and not raw):
        raise ConfigError("pick at least one sequence length")
    if not isinstance(raw, list | tuple):
        raise ConfigError(f"seq_lens must be a list of whole numbers, {example}; got {show(raw)}")
    if len(raw) > MAX_ENTRIES:
        raise ConfigError(f"seq_lens: at most {MAX_ENTRIES} entries, got {len(raw):,}")
    lens = []
    for value in raw:
        whole = isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        )
        if isinstance(value, bool) or not whole:
            raise ConfigError(f"seq_lens must be whole numbers, {example}; got {show(value)}")
        if not low <= value <= high:
            raise ConfigError(f"each seq_len must be between {low} and {high}, got {show(value)}")
        if int(value) not in offered:
            raise ConfigError(
                f"each seq_len must be one of {', '.join(map(str, offered))}, got {show(value)}"
            )
        lens.append(int(value))
    if len(set(lens)) > MAX_SWEEP_LENGTHS:
        raise ConfigError(
            f"at most {MAX_SWEEP_LENGTHS} sequence lengths per sweep, got {len(set(lens))}"
        )
    return sorted(set(lens))


def _page_shape(device: str, **shape: Any) -> dict[str, Any]:
    """The shared shape (the controls' fields, as the page's handlers pass them), checked as a
    shape (Workload's rules), then the page's ranges."""
    check_typed_ranges(shape, device)
    checked = shape_from_user(**shape)
    check_page_ranges(checked, device)
    return checked


def compare_request(variants: Any, device: str, **shape: Any) -> JobRequest:
    """Validate a Compare: the variant list, the shape, the CPU budget for one run and for the
    whole job (the variants that can run here)."""
    device = device_key(device)
    names = variant_ids(variants, what="compare", limit=MAX_COMPARE_VARIANTS[device])
    shape = _page_shape(device, **shape)
    workloads = [Workload(variant=name, **shape) for name in names]
    check_cpu_budget(workloads[0], device)  # one shape: one per-run check covers every variant
    runnable = _runnable(workloads, device)
    check_job_flops(runnable, device, "compare")
    return JobRequest(workloads, gpu_seconds=job_gpu_seconds(workloads))


def sweep_request(variants: Any, seq_lens: Any, device: str, **shape: Any) -> JobRequest:
    """Validate a Sweep: variants, every length, the number of points and the CPU budget.

    On a CPU a point above the per-run budget is not an error: the sweep marks it refused
    (see point_check); the points that would run must fit the job budget.
    """
    device = device_key(device)
    names = variant_ids(variants, what="sweep", limit=MAX_SWEEP_VARIANTS[device])
    lens = seq_len_list(seq_lens, device)
    points = len(names) * len(lens)
    if points > MAX_SWEEP_POINTS[device]:
        raise ConfigError(
            f"{len(names)} variants × {len(lens)} lengths = {points} points; a sweep on this "
            f"machine runs at most {MAX_SWEEP_POINTS[device]}: pick fewer"
        )
    shape = _page_shape(device, seq_len=lens[0], **shape)
    shape.pop("seq_len")
    workloads = [
        Workload(variant=name, seq_len=length, **shape) for name in names for length in lens
    ]
    admitted = [w for w in _runnable(workloads, device) if within_cpu_budget(w, device)]
    check_job_flops(admitted, device, "sweep")
    return JobRequest(workloads, lens, gpu_seconds=job_gpu_seconds(workloads))


def _runnable(workloads: Sequence[Workload], device: str) -> list[Workload]:
    """Those whose variant can run here (the others cost nothing: they are listed, not run)."""
    reasons = (
        unavailable_reasons(device, workloads[0].dtype, workloads[0].mode) if workloads else {}
    )
    return [w for w in workloads if not reasons.get(w.variant)]


def check_job_flops(workloads: Sequence[Workload], device: str, what: str) -> None:
    """On a CPU, the FLOPs per forward summed over a job's runs, against CPU_MAX_JOB_FLOPS."""
    if device != "cpu":
        return
    flops = sum(w.flops for w in workloads)
    if flops > CPU_MAX_JOB_FLOPS:
        raise ConfigError(
            f"this {what} needs {flops / 1e9:,.0f} GFLOP per forward summed over its "
            f"{len(workloads)} runs; on a CPU this app runs at most "
            f"{CPU_MAX_JOB_FLOPS / 1e9:,.0f}: pick fewer variants or lengths, or a smaller shape"
        )


def cpu_point_check(workload: Workload) -> None:
    """A sweep point above the CPU per-run budget is refused (and marked), not run."""
    check_cpu_budget(workload, "cpu")


def point_check(device: str) -> Callable[[Workload], None] | None:
    return cpu_point_check if device_key(device) == "cpu" else None


# -- the GPU slot ---------------------------------------------------------------------------
def gpu_seconds(workload: Workload) -> int:
    """@spaces.GPU duration of one run: compiled and Hub variants compile or download inside
    the slot."""
    return GPU_SECONDS_SLOW if workload.spec.slow_first_run else GPU_SECONDS


def job_gpu_seconds(workloads: Sequence[Workload]) -> int:
    """@spaces.GPU duration of a multi-run job: a base, each run, each slow variant's first run."""
    total, slow_seen = GPU_SECONDS_JOB, set()
    for workload in workloads:
        total += GPU_SECONDS_PER_RUN
        if gpu_seconds(workload) == GPU_SECONDS_SLOW and workload.variant not in slow_seen:
            slow_seen.add(workload.variant)
            total += GPU_SECONDS_SLOW - GPU_SECONDS_PER_RUN
    return min(total, GPU_SECONDS_JOB_MAX)
