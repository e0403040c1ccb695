"""Sweep: chosen variants over sequence lengths, to see where the quadratic cost bites.

Each point is one runner call. A point the memory estimate refuses, a variant unavailable here,
an out-of-memory run: each is recorded with its status and reason, never dropped, so the chart
can mark it where a line would otherwise just stop. Plain data, picklable (a ZeroGPU worker
runs it; profiling/views/compare_figures.py draws it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.roofline_runs import run_roofline
from profiling.analysis.summary import Summary
from profiling.jobs.executor import (
    RAN_ON,
    Answer,
    Executor,
    JobOptions,
    Placement,
    PointJob,
    ran_on_texts,
    run_chains,
)
from profiling.jobs.files import Progress, job_folder, write_zip
from profiling.run.runner import RunError, VariantUnavailable, run
from profiling.text_tables import markdown
from profiling.workload.availability import error_text
from profiling.workload.memory import check_memory, step_estimate_bytes
from profiling.workload.request import DEFAULT_START, DEFAULT_STOP, doubling
from profiling.workload.spec import (
    ConfigError,
    Workload,
    known_variants,
    passes,
    resolve_device,
    shape_from_user,
    shape_tag,
)

log = logging.getLogger(__name__)
# what "est. MiB" is (workload/memory.py's step_estimate_bytes), on a CPU and on a GPU; a run
# is refused on the whole run's estimate (float64 check included), which its reason quotes
ESTIMATE_NOTE = {
    False: "the variant's memory model of one step on a CPU, beyond its inputs (see step MiB)",
    True: "the variant's memory model of the profiled steps on a GPU, inputs included "
    "(against peak MiB)",
}
STEP_PEAK = "step MiB"  # a CPU point: the most one step allocated at once (run/cpu_memory.py)
SWEEP_COLUMNS = [
    "variant", "seq_len", "status", "GPU µs/fwd", "CPU µs/fwd", "peak MiB", STEP_PEAK,
    "est. MiB", "TFLOP/s", "reason",
]  # fmt: skip
STEP_NOTE = (
    f"{STEP_PEAK}: the most one measured step allocated at once beyond what was alive before "
    "it (the profiler's CPU memory records; a CPU has no allocator peak)"
)
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
    peak_mib: float | None = None  # a GPU point: max_memory_allocated
    step_mib: float | None = None  # a CPU point: what one step allocated at once, measured
    estimate_mib: float | None = None
    tflops: float | None = None
    trace_gz: Path | None = None
    saved_mib: float | None = None  # saved for backward beyond the inputs and output
    placement: Placement | None = None  # where it ran (None: it did not, see status)
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
    executor: Executor | None = None,
    **shape: Any,
) -> SweepResult:
    """Profile every (variant, seq_len) point, one after another (or on `executor`, e.g. a
    Ray cluster's GPUs: profiling/jobs/executor.py); never raises for a point.

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
    options = JobOptions(out_dir, progress, make_zip, stop, executor)
    return sweep_workloads(workloads, options, check)


def sweep_workloads(
    workloads: Sequence[Workload], options: JobOptions, check: Callable[[Workload], None] | None
) -> SweepResult:
    """Profile validated points of one shape (a JobRequest's), variant by variant, each over
    its lengths in order. An unavailable or out-of-memory point ends its variant's run: the
    longer lengths are marked, not tried. Each variant is one chain of the executor's (see
    profiling/jobs/executor.py): on Ray, variants run side by side and a variant's lengths one after
    another, so the rule gives the serial sweep's table."""
    device = resolve_device(workloads[0].device)
    out = job_folder(options.out_dir, "sweep")
    chains = _chains(workloads, out, check, device)
    answer = run_chains(chains, out, options, _ends_variant, f"{len(workloads)} points done")
    points, device_name = _points(chains, answer, device)
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
            f"est. MiB: {ESTIMATE_NOTE[device == 'cuda']}",
            *([] if device == "cuda" else [STEP_NOTE]),
        ],
    )
    if options.make_zip:
        result.zip_path = sweep_zip(result)
    return result


def _chains(
    workloads: Sequence[Workload],
    out: Path,
    check: Callable[[Workload], None] | None,
    device: str,
) -> list[list[PointJob]]:
    """The points as one chain per variant (consecutive workloads of one variant), in order."""
    chains: list[list[PointJob]] = []
    for index, workload in enumerate(workloads):
        estimate_mib = step_estimate_bytes(workload, device) / 1024**2
        name, seq_len = workload.variant, workload.seq_len
        job = PointJob(
            index=index,
            label=f"{name} S={seq_len}",
            workload=workload,
            run=partial(_profile_point, estimate_mib=estimate_mib, check=check),
            out_dir=out / name,
            failed=partial(_failed_point, name, seq_len, estimate_mib),
        )
        if chains and chains[-1][-1].workload.variant == name:
            chains[-1].append(job)
        else:
            chains.append([job])
    return chains


def _ends_variant(record: tuple[SweepPoint, str | None]) -> bool:
    return record[0].status in ("unavailable", "oom")


def _points(
    chains: list[list[PointJob]], answer: Answer, device: str
) -> tuple[list[SweepPoint], str]:
    """The executor's outcomes as points in the job's order, the unrun ones marked after the
    point that ended their variant; and the device name the last run saw."""
    points: list[SweepPoint] = []
    device_name = "CPU"
    for chain, outcomes in zip(chains, answer, strict=True):
        stopped: SweepPoint | None = None
        for job, outcome in zip(chain, outcomes, strict=True):
            if outcome is None:
                assert stopped is not None  # only a point that ended the chain leaves one unrun
                estimate_mib = step_estimate_bytes(job.workload, device) / 1024**2
                points.append(_not_run(stopped, job.workload.seq_len, estimate_mib))
                continue
            point, ran_on = outcome.value
            point = replace(point, placement=outcome.placement)
            stopped = point if _ends_variant(outcome.value) else stopped
            points.append(point)
            device_name = ran_on or device_name
    return points, device_name


def _failed_point(
    name: str, seq_len: int, estimate_mib: float, reason: str
) -> tuple[SweepPoint, None]:
    return SweepPoint(name, seq_len, "failed", reason, estimate_mib=estimate_mib), None


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
        result = run(workload, out_dir=out_dir, progress=step, step_memory=True)
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
        step_mib=None if result.step_peak_bytes is None else result.step_peak_bytes / 2**20,
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
            STEP_PEAK: point.step_mib,
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
    numeric = ["GPU µs/fwd", "CPU µs/fwd", "peak MiB", STEP_PEAK, "est. MiB", "TFLOP/s"]
    numeric += [SAVED] if SAVED in columns else []
    table[numeric] = table[numeric].astype(float)
    ran_on = ran_on_texts([point.placement for point in points])
    if ran_on is not None:
        table.insert(table.columns.get_loc("reason"), RAN_ON, ran_on)
    return table


def sweep_zip(result: SweepResult) -> Path:
    """One zip: the table (CSV, Markdown, JSON), every point's record (points.json: where it
    ran too) and one trace per point that ran."""
    entries: list[tuple[str, Path | str]] = [
        ("sweep.csv", result.table.to_csv(index=False)),
        ("sweep.md", markdown(result.table)),
        ("sweep.json", result.table.to_json(orient="records", indent=1)),
        ("points.json", json.dumps(points_json(result), indent=1)),  # with where each ran
    ]
    for point in result.points:
        if point.trace_gz is not None and point.trace_gz.exists():
            entries.append((f"{point.variant}/{point.trace_gz.name}", point.trace_gz))
    return write_zip(entries, f"sweep_{shape_tag(result.shape, result.device)}.zip")


def points_json(result: SweepResult) -> list[dict[str, Any]]:
    """The raw numbers, JSON-ready, so a chart can be drawn later on another machine."""
    return [
        {**{f.name: _plain(getattr(p, f.name)) for f in fields(p) if f.name not in STORED},
         "trace": _name(p.trace_gz)}
        for p in result.points
    ]  # fmt: skip


def _plain(value: Any) -> Any:
    """A point's field as JSON takes it (where it ran is a dataclass)."""
    return asdict(value) if is_dataclass(value) else value


def _name(path: Path | None) -> str | None:
    return path.name if path else None
