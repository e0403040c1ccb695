"""Sweep: chosen variants over sequence lengths, to see where the quadratic cost bites.

Each point is one runner call. A point the memory estimate refuses, a variant unavailable here,
an out-of-memory run: each is recorded with its status and reason, never dropped, so the chart
can mark it where a line would otherwise just stop. Plain data, picklable (a ZeroGPU worker
runs it; profiling/compare_figures.py draws it).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.availability import error_text
from profiling.job_files import Progress, cancelled, run_progress, write_zip
from profiling.memory_estimate import check_memory, estimate_bytes
from profiling.roofline_runs import run_roofline
from profiling.runner import RunError, VariantUnavailable, run
from profiling.summary import Summary
from profiling.text_tables import markdown
from profiling.workload import (
    LIMITS,
    ConfigError,
    Workload,
    known_variants,
    passes,
    resolve_device,
    shape_from_user,
    shape_tag,
)

log = logging.getLogger(__name__)
DEFAULT_START, DEFAULT_STOP = 256, 16384
SWEEP_COLUMNS = [
    "variant", "seq_len", "status", "GPU µs/fwd", "CPU µs/fwd", "peak MiB", "est. MiB",
    "TFLOP/s", "reason",
]  # fmt: skip
# a point's fields the run store reads (issue 34), left out of its JSON, with its trace path
STORED = ("trace_gz", "summary", "kernels", "roles", "roofline", "operators")
SAVED = "saved MiB"  # a training sweep's column: what the forward keeps for backward


@dataclass
class SweepPoint:
    variant: str
    seq_len: int
    status: str  # ok | refused (memory estimate) | unavailable | oom | failed | skipped
    reason: str = ""
    gpu_us: float | None = None
    cpu_us: float | None = None
    peak_mib: float | None = None
    estimate_mib: float | None = None
    tflops: float | None = None
    trace_gz: Path | None = None
    saved_mib: float | None = None  # saved for backward beyond the inputs and output
    # issue 34: what the run store keeps of a point that ran (profiling/store/hooks.py)
    summary: Summary | None = field(default=None, repr=False)
    kernels: pd.DataFrame | None = field(default=None, repr=False)
    roles: pd.DataFrame | None = field(default=None, repr=False)
    roofline: pd.DataFrame | None = field(default=None, repr=False)
    operators: pd.DataFrame | None = field(default=None, repr=False)


@dataclass
class SweepResult:
    shape: dict[str, Any]  # the Workload fields shared by every point (seq_len varies)
    device: str
    device_name: str
    variants: list[str]
    seq_lens: list[int]
    points: list[SweepPoint]
    table: pd.DataFrame  # SWEEP_COLUMNS, one row per point
    out_dir: Path
    zip_path: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def time_basis(self) -> str:
        """Which time the chart plots: GPU µs/forward on a GPU, CPU µs/forward on the CPU."""
        return "GPU" if self.device == "cuda" else "CPU"


def doubling(start: int = DEFAULT_START, stop: int = DEFAULT_STOP) -> list[int]:
    """start, 2·start, … up to stop (inclusive), within the seq_len limits."""
    low, high = LIMITS["seq_len"]
    length, lengths = max(start, low), []
    while length <= min(stop, high):
        lengths.append(length)
        length *= 2
    return lengths


def default_seq_lens(
    variants: Sequence[str],
    start: int = DEFAULT_START,
    stop: int = DEFAULT_STOP,
    **shape: Any,
) -> list[int]:
    """Doubling from `start` to `stop`, cut after the last length any variant's estimate fits.

    Lengths where only some variants fit stay in (those points are refused and marked); the
    list ends where none fits, because past that the chart would only show refusals.
    """
    common = shape_from_user(**shape)
    device = resolve_device(common["device"])
    fitting: list[int] = []
    for length in doubling(start, stop):
        points = [
            Workload(variant=variant, **{**common, "seq_len": length}) for variant in variants
        ]
        if any(passes(check_memory, point, device) for point in points):
            fitting.append(length)
        else:
            break
    return fitting


def sweep(
    variants: Sequence[str],
    seq_lens: Sequence[int] | None = None,
    *,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    make_zip: bool = True,
    check: Callable[[Workload], None] | None = None,
    stop: Callable[[], bool] | None = None,
    **shape: Any,
) -> SweepResult:
    """Profile every (variant, seq_len) point, one after another; never raises for a point.

    `shape` takes Workload's fields but `variant` and `seq_len`. Raises ConfigError only for a
    bad shape, an unknown variant or an invalid sequence length. `check` is an extra admission
    test per point (the app's CPU budget): a ConfigError from it marks the point refused.
    Raises JobCancelled when `stop()` is true before a point (its folder is then removed).
    """
    names = known_variants(variants)
    common = shape_from_user(**{k: v for k, v in shape.items() if k != "seq_len"})
    lens = sorted(set(seq_lens)) if seq_lens else default_seq_lens(names, **shape)
    # every point checked before the first runs: a bad length is refused, not half a sweep
    workloads = [
        Workload(variant=name, **{**common, "seq_len": length}).validated()
        for name in names
        for length in lens
    ]
    return sweep_workloads(
        workloads, out_dir=out_dir, progress=progress, make_zip=make_zip, check=check, stop=stop
    )


def sweep_workloads(
    workloads: Sequence[Workload],
    *,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    make_zip: bool = True,
    check: Callable[[Workload], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> SweepResult:
    """Profile validated points of one shape (a JobRequest's), variant by variant, each over
    its lengths in order. An unavailable or out-of-memory point ends its variant's run: the
    longer lengths are marked, not tried."""
    device = resolve_device(workloads[0].device)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="attnprof-sweep-"))
    report = progress or (lambda fraction, text: None)
    total = len(workloads)
    points: list[SweepPoint] = []
    device_name = "CPU"
    stopped: SweepPoint | None = None  # the point that ended the current variant's run
    for index, workload in enumerate(workloads):
        name, seq_len = workload.variant, workload.seq_len
        if stopped is not None and stopped.variant != name:
            stopped = None
        estimate_mib = estimate_bytes(workload) / 1024**2
        if stopped is not None:
            points.append(_not_run(stopped, seq_len, estimate_mib))
            continue
        cancelled(stop, out, made=out_dir is None)

        step = run_progress(report, index, total, f"{name} S={seq_len}")
        point, ran_on = _profile_point(workload, out / name, step, estimate_mib, check)
        if point.status in ("unavailable", "oom"):
            stopped = point
        points.append(point)
        device_name = ran_on or device_name
    cancelled(stop, out, made=out_dir is None)  # cancelled during the last run: no zip, no page
    report(1.0, f"{total} points done")
    result = SweepResult(
        shape={k: v for k, v in workloads[0].shape().items() if k != "seq_len"},
        device=device,
        device_name=device_name,
        variants=list(dict.fromkeys(w.variant for w in workloads)),
        seq_lens=sorted({w.seq_len for w in workloads}),
        points=points,
        table=sweep_table(points),
        out_dir=out,
        notes=[
            f"time: {'GPU' if device == 'cuda' else 'CPU'} µs per forward",
            "est. MiB: the memory estimate that refuses a run before anything is allocated",
        ],
    )
    if make_zip:
        result.zip_path = sweep_zip(result)
    return result


def _not_run(stopped: SweepPoint, seq_len: int, estimate_mib: float) -> SweepPoint:
    """A longer length of a variant whose run ended at `stopped`: unavailable stays so, the
    rest is skipped."""
    if stopped.status == "unavailable":
        status, reason = "unavailable", stopped.reason
    else:
        status, reason = "skipped", f"not run: {stopped.status} at S={stopped.seq_len}"
    return SweepPoint(stopped.variant, seq_len, status, reason, estimate_mib=estimate_mib)


def _profile_point(
    workload: Workload,
    out_dir: Path,
    step: Progress,
    estimate_mib: float,
    check: Callable[[Workload], None] | None = None,
) -> tuple[SweepPoint, str | None]:
    """One point and the device name it ran on (None when it did not run)."""
    name, seq_len = workload.variant, workload.seq_len
    try:
        if check is not None:
            check(workload)
        result = run(workload, out_dir=out_dir, progress=step)
    except ConfigError as exc:
        return SweepPoint(name, seq_len, "refused", str(exc), estimate_mib=estimate_mib), None
    except VariantUnavailable as exc:
        return SweepPoint(name, seq_len, "unavailable", str(exc), estimate_mib=estimate_mib), None
    except RunError as exc:
        status = "oom" if "out of memory" in str(exc) else "failed"
        return SweepPoint(name, seq_len, status, str(exc), estimate_mib=estimate_mib), None
    except Exception as exc:  # raised before the run began (the runner turns its own into
        # RunError): a failure, logged, that must not lose the other points
        log.exception("%s failed", workload)
        reason = error_text(exc)
        return SweepPoint(name, seq_len, "failed", reason, estimate_mib=estimate_mib), None
    result.trace_json.unlink(missing_ok=True)
    summary = result.summary
    point = SweepPoint(
        name,
        seq_len,
        "ok",
        "; ".join(summary.notes),
        gpu_us=summary.gpu_us_per_forward,
        cpu_us=summary.cpu_us_per_forward,
        peak_mib=summary.peak_mib,
        estimate_mib=estimate_mib,
        tflops=summary.tflops,
        trace_gz=result.trace_gz,
        saved_mib=None if summary.saved_extra_bytes is None else summary.saved_extra_bytes / 2**20,
        summary=summary,
        kernels=result.kernels,
        roles=result.trace.roles(),
        roofline=run_roofline(result),
        operators=result.operators,
    )
    return point, summary.device_name


def sweep_table(points: Sequence[SweepPoint]) -> pd.DataFrame:
    """One row per point, refused and failed ones included with their reason."""
    rows = [
        {
            "variant": point.variant,
            "seq_len": point.seq_len,
            "status": point.status,
            "GPU µs/fwd": point.gpu_us,
            "CPU µs/fwd": point.cpu_us,
            "peak MiB": point.peak_mib,
            "est. MiB": point.estimate_mib,
            "TFLOP/s": point.tflops,
            "reason": point.reason,
            SAVED: point.saved_mib,
        }
        for point in points
    ]
    columns = list(SWEEP_COLUMNS)
    if any(point.saved_mib is not None for point in points):  # a sweep of training runs
        columns.insert(columns.index("est. MiB") + 1, SAVED)
    table = pd.DataFrame(rows, columns=columns)
    numeric = ["GPU µs/fwd", "CPU µs/fwd", "peak MiB", "est. MiB", "TFLOP/s"]
    numeric += [SAVED] if SAVED in columns else []
    table[numeric] = table[numeric].astype(float)
    return table


def sweep_zip(result: SweepResult) -> Path:
    """One zip: the table (CSV, Markdown, JSON) and one trace per point that ran."""
    entries: list[tuple[str, Path | str]] = [
        ("sweep.csv", result.table.to_csv(index=False)),
        ("sweep.md", markdown(result.table)),
        ("sweep.json", result.table.to_json(orient="records", indent=1)),
    ]
    for point in result.points:
        if point.trace_gz is not None and point.trace_gz.exists():
            entries.append((f"{point.variant}/{point.trace_gz.name}", point.trace_gz))
    return write_zip(entries, f"sweep_{shape_tag(result.shape, result.device)}.zip")


def points_json(result: SweepResult) -> list[dict[str, Any]]:
    """The raw numbers, JSON-ready, so a chart can be drawn later on another machine."""
    return [
        {**{f.name: getattr(p, f.name) for f in fields(p) if f.name not in STORED},
         "trace": _name(p.trace_gz)}
        for p in result.points
    ]  # fmt: skip


def _name(path: Path | None) -> str | None:
    return path.name if path else None
