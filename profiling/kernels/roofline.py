"""A roofline per kernel: each GPU kernel's FLOPs and bytes, its achieved TFLOP/s and TB/s,
and what bounds it, against the device's datasheet roofs (profiling.analysis.peaks).

Where a kernel's figures come from, most exact first (`kernel_work`): the profiler's "bytes"
of a memcpy or memset; the shapes an uploaded trace recorded for the op that launched it
(profiling.kernels.shapes); the kernel's role and the workload (profiling.kernels.work). Each
row says which (`source`), and a kernel none of them can size is "not placed" with the reason.

The bound uses analysis.bounds' rule per kernel: the ridge is peak TFLOP/s ÷ TB/s, a kernel
left of it is memory-bound, right of it compute-bound, and one under FAR_FROM_BOTH % of both
peaks is bound by neither (latency, launch). The compute peak is the one the kernel can use:
the dtype's tensor-core peak for GEMMs and fused attention, FP32 on CUDA cores for the rest
(elementwise, softmax and reductions do not use tensor cores) and for kernels named fp32.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from profiling.analysis.bounds import FAR_FROM_BOTH
from profiling.analysis.columns import ROOFLINE_COLUMNS
from profiling.analysis.peaks import peak_bandwidth, peak_tflops, roof_label
from profiling.kernels.names import classify, short_name
from profiling.kernels.shapes import args_work, shape_work
from profiling.kernels.work import (
    AttentionShape,
    Work,
    not_placed,
    profiler_bytes,
    role_work,
    says_fp32,
)
from profiling.trace.query import by_identity, factorize_texts, first_rows

__all__ = [
    "AttentionShape",
    "Work",
    "kernel_bound",
    "kernel_roof",
    "kernel_work",
    "role_work",
    "roofline_rows",
    "shape_work",
]
NOT_PLACED_BOUND = "n/a (not placed)"
NEITHER = (
    f"neither: under {FAR_FROM_BOTH:.0f}% of both roofs (latency, launches, or the kernel itself)"
)
_TENSOR_CORE_CATEGORIES = ("gemm", "fused attention")


def kernel_work(
    role: str,
    kernel_name: str,
    phase: str,
    shape: AttentionShape | None,
    args: Mapping[str, Any] | None = None,
    ops: Sequence[str] = (),
    op_args: Mapping[str, Any] | None = None,
) -> Work:
    """One kernel call's Work from the best source there is: the profiler's bytes, then the
    launching op's recorded shapes (`op_args`, ops[0] its name), then the role and `shape`
    (None for an uploaded trace: then a kernel the first two cannot size is not placed)."""
    measured = profiler_bytes(kernel_name, args)
    if measured is not None:
        return measured
    if ops and op_args:
        recorded = args_work(ops[0], op_args)
        if recorded is not None:
            return recorded
    if shape is None:
        return not_placed(
            "no recorded shapes for the op that launched it" if ops else "no launching op found"
        )
    return role_work(role, kernel_name, phase, shape, args, ops)


def kernel_roof(kernel_name: str, device_name: str, dtype: str) -> tuple[str, float | None]:
    """(label, TFLOP/s) of the compute ceiling a kernel can reach (module docstring)."""
    tensor_cores = classify(kernel_name) in _TENSOR_CORE_CATEGORIES
    kind = dtype if tensor_cores and not says_fp32(kernel_name) else "float32"
    return roof_label(device_name, kind) or "", peak_tflops(device_name, kind)


def kernel_bound(
    flops: float | None,
    moved: float | None,
    seconds: float,
    peak: float | None,
    bandwidth: float | None,
) -> str:
    """compute / memory / neither: latency/launch, as analysis.bounds decides for a run."""
    if flops is None or moved is None:
        return NOT_PLACED_BOUND
    if not seconds or seconds <= 0:
        return "n/a (no GPU time)"
    if peak is None or bandwidth is None:
        return "n/a (no datasheet peaks for this device)"
    pct_flops = 100 * flops / seconds / 1e12 / peak
    pct_bandwidth = 100 * moved / seconds / 1e12 / bandwidth
    if max(pct_flops, pct_bandwidth) < FAR_FROM_BOTH:
        return NEITHER
    intensity = flops / moved if moved else float("inf")
    return "memory" if intensity < peak / bandwidth else "compute"


def roofline_rows(
    kernels: Sequence[str],
    durations_us: Sequence[float],
    roles: Sequence[str],
    phases: Sequence[str],
    works: Sequence[Work],
    device_name: str,
    dtype: str,
) -> pd.DataFrame:
    """One row per (kernel name, role, phase), longest total first (ROOFLINE_COLUMNS).

    The inputs hold one entry per kernel call, in any order: its full name, duration, role,
    phase and Work. FLOP and bytes per call are the calls' means (None when any call has
    none); the rates are over the calls' total time."""
    if not len(kernels) == len(durations_us) == len(roles) == len(phases) == len(works):
        raise ValueError("kernels, durations_us, roles, phases and works: one entry per call")
    # groups of (name, role, phase) in order of first call; within each, its calls' distinct
    # Works (kernels with one key share one) with how many calls each: 10⁵ calls, a few groups
    group, first_call = _codes(kernels, roles, phases)
    work_codes, distinct_works = by_identity(works)  # calls of one key share one Work
    pair, pairs = pd.factorize(group * len(distinct_works) + work_codes)
    times = np.bincount(pair, minlength=len(pairs))
    per_group: list[list[tuple[Work, int]]] = [[] for _ in first_call]
    for code, count in zip(pairs.tolist(), times.tolist(), strict=True):
        per_group[code // len(distinct_works)].append(
            (distinct_works[code % len(distinct_works)], count)
        )
    calls = np.bincount(group, minlength=len(first_call))
    total = np.bincount(
        group, weights=np.asarray(durations_us, dtype=float), minlength=len(first_call)
    )
    bandwidth = peak_bandwidth(device_name)
    rows = [
        _row(kernels[i], roles[i], phases[i], int(calls[g]), float(total[g]), per_group[g],
             kernel_roof(kernels[i], device_name, dtype), bandwidth)
        for g, i in enumerate(first_call.tolist())
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=list(ROOFLINE_COLUMNS))
    order = np.argsort(-frame["total_us"].to_numpy(dtype=float), kind="stable")
    return frame.iloc[order].reset_index(drop=True)


def _codes(*columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """A code per call for its combination of `columns`, in order of first call, and the
    first call of each code."""
    combined = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        codes, values = factorize_texts(column)
        combined = combined * max(len(values), 1) + codes
    group, distinct = pd.factorize(combined)
    return group.astype(np.int64), first_rows(group, len(distinct))


def _row(
    name: str,
    role: str,
    phase: str,
    calls: int,
    total_us: float,
    works: list[tuple[Work, int]],
    roof: tuple[str, float | None],
    bandwidth: float | None,
) -> dict[str, Any]:
    """One row from its calls' count and total µs and their distinct Works, each with the
    number of calls that did it."""
    placed = all(work.placed for work, _ in works)
    flops = sum((work.flops or 0.0) * times for work, times in works) if placed else None
    moved = sum((work.bytes or 0.0) * times for work, times in works) if placed else None
    seconds = total_us * 1e-6
    rate = seconds > 0 and placed
    return {
        "kernel": short_name(name),
        "role": role,
        "phase": phase,
        "calls": calls,
        "mean_us": total_us / calls,
        "flop_per_call": flops / calls if flops is not None else None,
        "bytes_per_call": moved / calls if moved is not None else None,
        "source": "; ".join(dict.fromkeys(work.source for work, _ in works)),
        "tflops": flops / seconds / 1e12 if rate and flops is not None else None,
        "tbps": moved / seconds / 1e12 if rate and moved is not None else None,
        "intensity": flops / moved if placed and moved else None,
        "bound": kernel_bound(flops, moved, seconds, roof[1], bandwidth),
        "roof": roof[0],
        "total_us": total_us,
        "name": name,
    }
