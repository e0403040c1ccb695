"""Compare: several variants at one shape, profiled one after another, as the post's table.

`compare()` is the GPU job: it calls the runner once per variant and turns each outcome into a
row of the "at a glance" table. A variant that cannot run (unavailable here, refused by the
memory estimate, failed) is a row with its reason, never a guess. The result is plain data
(paths, DataFrames, dataclasses) so it crosses a ZeroGPU worker; figures are built outside it
(profiling/views/compare_figures.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from attention import VARIANTS
from profiling.analysis import counters_join as join
from profiling.analysis.bounds import cpu_or_gpu_bound as bound
from profiling.analysis.launch import LaunchStats
from profiling.analysis.peaks import Peak, peak_entry, peak_tflops, peaks_table
from profiling.analysis.roofline_runs import run_roofline
from profiling.analysis.summary import Summary
from profiling.jobs import executor as placed
from profiling.jobs.executor import RAN_ON, Executor, JobOptions, Placement, PointJob, run_chains
from profiling.jobs.files import Progress, job_folder, write_zip
from profiling.run import counters as counter_pass
from profiling.run.runner import ProfileResult, RunError, VariantUnavailable, run
from profiling.text_tables import markdown
from profiling.vocabulary import BACKWARD, FORWARD
from profiling.workload.availability import error_text
from profiling.workload.spec import (
    DTYPES,
    ConfigError,
    Workload,
    known_variants,
    resolve_device,
    shape_from_user,
    shape_tag,
)

log = logging.getLogger(__name__)

# The post's six, in its order: the variants always in Compare's default list.
POST_VARIANTS = tuple(v.id for v in VARIANTS.values() if v.compare_default == "always")

# -- results ------------------------------------------------------------------------------------

GLANCE_COLUMNS = [
    "variant", "status", "kernels/fwd", "GPU µs/fwd", "CPU µs/fwd", "bound", "peak MiB",
    "TFLOP/s", "% of peak", "TB/s", "% of BW peak", "roofline", "rel. err", "ran",
    "dominant kernel", "decoded", "GPU busy %", "idle gaps", "launch delay µs",
    "CPU launch µs/fwd", "reason",
]  # fmt: skip
# Added after "rel. err" for runs with a backward ("/fwd" figures are then per step)
TRAINING_COLUMNS = ["fwd GPU µs", "bwd GPU µs", "fwd CPU µs", "bwd CPU µs", "saved MiB",
                    "dQ err", "dK err", "dV err"]  # fmt: skip


@dataclass
class VariantRun:
    """One variant's outcome: the numbers when it ran, the reason when it did not."""

    variant: str
    label: str
    status: str  # ok | unavailable | refused | failed
    reason: str = ""
    summary: Summary | None = None
    launch: LaunchStats | None = None
    kernels: pd.DataFrame | None = None
    operators: pd.DataFrame | None = None
    timeline: pd.DataFrame | None = None  # GPU work + attn_fwd CPU spans, for the mini-Gantts
    roles: pd.DataFrame | None = None  # µs per step by role (profiling.kernels.roles)
    roofline: pd.DataFrame | None = None  # per kernel (profiling.analysis.roofline_runs)
    trace_gz: Path | None = None
    table_txt: Path | None = None
    seconds: float = 0.0
    # issue 23: the run's figures (spread, clocks) and its allocator snapshot, for the zip
    extra_files: list[Path] = field(default_factory=list)
    placement: Placement | None = None  # where it ran (profiling/jobs/executor.py)
    counters: join.Counters | None = None  # issue 36: ncu's pass, when asked for

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class CompareResult:
    shape: dict[str, Any]  # the Workload fields shared by every variant
    device: str
    device_name: str
    runs: list[VariantRun]
    glance: pd.DataFrame  # GLANCE_COLUMNS, one row per variant asked for
    out_dir: Path
    zip_path: Path | None = None
    peak: Peak | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ran(self) -> list[VariantRun]:
        return [r for r in self.runs if r.ok]

    def unavailable(self) -> pd.DataFrame:
        """Variants that did not run, with the reason."""
        rows = [(r.variant, r.status, r.reason) for r in self.runs if not r.ok]
        return pd.DataFrame(rows, columns=["variant", "status", "reason"])


# -- the job ------------------------------------------------------------------------------------


def default_variants(device: str = "auto", dtype: str = "bfloat16") -> list[str]:
    """What Compare runs when no variant is named: each variant says whether it is in (the
    post's six always; the kernels builds where they can run on this device and dtype)."""
    device = resolve_device(device)
    torch_dtype = DTYPES.get(dtype, torch.bfloat16)
    return [
        v.id
        for v in VARIANTS.values()
        if v.compare_default == "always"
        or (v.compare_default == "where it runs" and v.unavailable(device, torch_dtype) is None)
    ]


def compare(
    variants: Sequence[str] | None = None,
    *,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    make_zip: bool = True,
    stop: Callable[[], bool] | None = None,
    executor: Executor | None = None,
    **shape: Any,
) -> CompareResult:
    """Profile each variant at one shape, one after another; never raises for one variant.

    `shape` takes Workload's fields but `variant` (seq_len, dtype, batch, heads, head_dim,
    causal, device, steps). Raises ConfigError only for a bad shape or an unknown variant id,
    and JobCancelled when `stop()` is true before a variant (its folder is then removed).
    """
    common = shape_from_user(**shape)  # a bad shape is the user's error, not a variant's
    device = resolve_device(common["device"])
    names = known_variants(variants) if variants else default_variants(device, common["dtype"])
    workloads = [Workload(variant=name, **common) for name in names]
    return compare_workloads(workloads, JobOptions(out_dir, progress, make_zip, stop, executor))


def compare_workloads(workloads: Sequence[Workload], options: JobOptions) -> CompareResult:
    """Profile validated workloads of one shape (a JobRequest's), one after another, or side
    by side on `options.executor`'s workers (a Ray cluster's GPUs: profiling/jobs/executor.py)."""
    first = workloads[0]
    device = resolve_device(first.device)
    out = job_folder(options.out_dir, "compare")
    # the job's counter passes share one bound (profiling.run.counters.JOB_SECONDS)
    started = partial(_started, counter_seconds=counter_pass.pass_seconds(len(workloads)))
    chains = [  # chains of one: no variant's outcome stops another
        [PointJob(i, w.variant, w, started, out / w.variant, partial(_failed_run, w))]
        for i, w in enumerate(workloads)
    ]
    answer = run_chains(chains, out, options, lambda run: False, f"{len(workloads)} variants done")
    runs = [replace(o.value, placement=o.placement) for [o] in answer if o is not None]
    device_name = next((r.summary.device_name for r in runs if r.summary), _device_name(device))
    peak = peak_entry(device_name) if device == "cuda" else None
    result = CompareResult(
        shape=first.shape(),
        device=device,
        device_name=device_name,
        runs=runs,
        glance=glance_table(runs, device_name, first.dtype),
        out_dir=out,
        peak=peak,
        notes=_notes(runs, device, peak),
    )
    if options.make_zip:
        result.zip_path = compare_zip(result)
    return result


def _started(
    workload: Workload,
    out_dir: Path,
    progress: Progress,
    counter_seconds: float = counter_pass.PASS_SECONDS,
) -> VariantRun:
    progress(0.0, "starting")
    if not workload.counters:  # the call as it was before counters had a job's bound
        return profile_one(workload, out_dir, progress)
    return profile_one(workload, out_dir, progress, counter_seconds)


def _failed_run(workload: Workload, reason: str) -> VariantRun:
    """A variant no worker could run (each that tried died): a failure with the reason."""
    return VariantRun(workload.variant, workload.spec.label, "failed", reason)


def profile_one(
    workload: Workload,
    out_dir: Path,
    progress: Progress,
    counter_seconds: float = counter_pass.PASS_SECONDS,
) -> VariantRun:
    """Run one variant and keep what the views need; errors become a status and a reason."""
    label = workload.spec.label
    try:
        bound = {"counter_seconds": counter_seconds} if workload.counters else {}
        result = run(workload, out_dir=out_dir, progress=progress, **bound)
    except VariantUnavailable as exc:
        return VariantRun(workload.variant, label, "unavailable", str(exc))
    except ConfigError as exc:
        return VariantRun(workload.variant, label, "refused", str(exc))
    except RunError as exc:
        return VariantRun(workload.variant, label, "failed", str(exc))
    except Exception as exc:  # raised before the run began (the runner turns its own into
        # RunError): a failure, logged, that must not lose the other variants
        log.exception("%s failed", workload)
        reason = error_text(exc)
        return VariantRun(workload.variant, label, "failed", reason)
    return from_profile(result)


def from_profile(result: ProfileResult) -> VariantRun:
    """A finished run as a compare row: summary, launch figures and a small timeline, from
    the trace the run read (the files are not read again)."""
    result.trace_json.unlink(missing_ok=True)  # the .json.gz holds the same bytes, compressed
    return VariantRun(
        variant=result.config.variant,
        label=result.config.spec.label,
        status="ok",
        summary=result.summary,
        launch=result.trace.launch_stats(),
        kernels=result.kernels,
        operators=result.operators,
        timeline=timeline(result.trace.columns()),
        roles=result.trace.roles(),
        roofline=join.measured_roofline(run_roofline(result), result.counters, result.trace.phases),
        trace_gz=result.trace_gz,
        table_txt=result.table_txt,
        seconds=result.seconds,
        extra_files=[p for p in (result.run_json, result.memory_snapshot) if p is not None],
        counters=result.counters,
    )


def timeline(spans: pd.DataFrame) -> pd.DataFrame:
    """What a mini-Gantt draws: GPU kernels/memcpy/memset and the attn_fwd, attn_bwd CPU spans."""
    keep = (spans["kind"] == "gpu") & spans["category"].isin(["kernel", "memcpy", "memset"])
    keep |= (spans["kind"] == "cpu") & spans["name"].isin([FORWARD, BACKWARD])
    cols = ["lane", "kind", "name", "category", "start_us", "dur_us", "end_us", "step"]
    out = spans.loc[keep, cols].copy()
    out["lane"] = out["lane"].astype(str)
    return out.reset_index(drop=True)


def _glance_row(variant_run: VariantRun, peak: float | None) -> dict[str, Any]:
    """One variant's row of the glance table (its status and reason where it did not run)."""
    row: dict[str, Any] = {
        "variant": variant_run.variant,
        "status": variant_run.status,
        "reason": variant_run.reason,
    }
    summary, launch = variant_run.summary, variant_run.launch
    if summary is not None:
        on_gpu = summary.gpu_us_per_forward is not None  # None: the runner saw no GPU work
        row.update(
            {
                "kernels/fwd": summary.kernels_per_forward,
                "GPU µs/fwd": summary.gpu_us_per_forward,
                "CPU µs/fwd": summary.cpu_us_per_forward,
                "bound": bound(summary.cpu_us_per_forward, summary.gpu_us_per_forward),
                "peak MiB": summary.peak_mib,
                "TFLOP/s": summary.tflops,
                "% of peak": 100 * summary.tflops / peak
                if (peak and summary.tflops is not None and on_gpu)
                else None,
                "TB/s": summary.tbps,
                "% of BW peak": summary.pct_peak_bandwidth,
                "roofline": summary.roofline_bound or None,
                "rel. err": summary.rel_err,
                "ran": summary.ran,
                "dominant kernel": summary.dominant_kernel,
                "decoded": summary.dominant_decoded,
                "reason": "; ".join(summary.notes),
                **training_figures(summary),
                **join.glance_figures(variant_run.counters),
            }
        )
    if launch is not None and launch.busy_pct is not None:
        row.update(
            {
                "GPU busy %": launch.busy_pct,
                "idle gaps": launch.gaps,
                "launch delay µs": launch.launch_delay_mean_us,
                "CPU launch µs/fwd": launch.cpu_launch_us_per_forward,
            }
        )
    return row


def glance_table(runs: Iterable[VariantRun], device_name: str, dtype: str) -> pd.DataFrame:
    """The post's "at a glance" table, plus launch/idle figures; a row per variant asked for."""
    peak = peak_tflops(device_name, dtype)
    runs = list(runs)
    rows = [_glance_row(variant_run, peak) for variant_run in runs]
    columns, numeric = GLANCE_COLUMNS, [
        "kernels/fwd", "GPU µs/fwd", "CPU µs/fwd", "peak MiB", "TFLOP/s", "% of peak", "TB/s",
        "% of BW peak", "rel. err", "GPU busy %", "launch delay µs", "CPU launch µs/fwd",
    ]  # fmt: skip
    if any(TRAINING_COLUMNS[0] in row for row in rows):
        at = GLANCE_COLUMNS.index("rel. err") + 1
        columns = [*GLANCE_COLUMNS[:at], *TRAINING_COLUMNS, *GLANCE_COLUMNS[at:]]
        numeric += TRAINING_COLUMNS
    columns, numeric = join.glance_columns(rows, columns, numeric)  # issue 36: when measured
    table = pd.DataFrame(rows).reindex(columns=columns)
    table[numeric] = table[numeric].astype(float)
    table["idle gaps"] = table["idle gaps"].astype("Int64")
    ran_on = placed.ran_on_texts([variant_run.placement for variant_run in runs])
    if ran_on is not None:
        table.insert(table.columns.get_loc("reason"), RAN_ON, ran_on)
    return table


def training_figures(summary: Summary) -> dict[str, Any]:
    """A run with a backward: each phase's GPU and CPU µs per step, the bytes its forward
    saves for backward beyond the inputs and output, and the gradients' errors."""
    if summary.mode == "forward":
        return {}
    phases = {row["phase"]: row for row in summary.phases}
    figures: dict[str, Any] = {}
    for short, name in (("fwd", FORWARD), ("bwd", BACKWARD)):
        row = phases.get(name, {})
        figures[f"{short} GPU µs"] = row.get("gpu_us_per_forward")
        figures[f"{short} CPU µs"] = row.get("cpu_us")
    extra = summary.saved_extra_bytes
    figures["saved MiB"] = extra / 1024**2 if extra is not None else None
    for name in ("dq", "dk", "dv"):
        figures[f"d{name[1].upper()} err"] = (summary.grad_err or {}).get(name)
    return figures


# -- downloads -----------------------------------------------------------------------------------


def compare_zip(result: CompareResult) -> Path:
    """One zip with every trace (.json.gz), operator table (.txt) and the tables as CSV."""
    entries: list[tuple[str, Path | str]] = [
        ("glance.csv", result.glance.to_csv(index=False)),
        ("glance.md", markdown(result.glance)),
        ("peaks.csv", peaks_table().to_csv(index=False)),
        ("ran_on.csv", placed.ran_on_csv((r.variant, r.placement) for r in result.runs)),
    ]
    for variant_run in result.runs:
        folder = variant_run.variant
        if not variant_run.ok:
            entries.append((f"{folder}/{variant_run.status}.txt", variant_run.reason + "\n"))
            continue
        for path in (variant_run.trace_gz, variant_run.table_txt, *variant_run.extra_files):
            if path is not None and path.exists():
                entries.append((f"{folder}/{path.name}", path))
        if variant_run.kernels is not None:
            entries.append((f"{folder}/kernels.csv", variant_run.kernels.to_csv(index=False)))
        if variant_run.launch is not None:
            launches = variant_run.launch.per_launch.to_csv(index=False)
            entries.append((f"{folder}/launches.csv", launches))
    tag = shape_tag(result.shape, result.device)
    return write_zip(entries, f"compare_{tag}.zip")


# -- helpers -------------------------------------------------------------------------------------


def _device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "CPU"


def _notes(runs: list[VariantRun], device: str, peak: Peak | None) -> list[str]:
    notes = []
    basis = next((r.summary.tflops_basis for r in runs if r.summary), None)
    if basis:
        notes.append(f"TFLOP/s: {basis}")
    if device == "cuda":
        notes.append(
            f"% of peak: against {peak.source}"
            if peak
            else "% of peak: device not in the datasheet table, so no percentage"
        )
    else:
        notes.append("on CPU: no GPU figures, no peak memory, no % of peak")
    return notes
