"""Compare: several variants at one shape, profiled one after another, as the post's table.

`compare()` is the GPU job: it calls the runner once per variant and turns each outcome into a
row of the "at a glance" table. A variant that cannot run (unavailable here, refused by the
memory estimate, failed) is a row with its reason, never a guess. The result is plain data
(paths, DataFrames, dataclasses) so it crosses a ZeroGPU worker; figures are built outside it
(profiling/compare_figures.py).
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from attention import VARIANTS
from profiling.jobs import JobCancelled
from profiling.launch import LaunchStats
from profiling.runner import ProfileResult, RunError, VariantUnavailable, run
from profiling.summary import Summary
from profiling.vocabulary import FORWARD
from profiling.workload import (
    DTYPES,
    ConfigError,
    Workload,
    known_variants,
    resolve_device,
    shape_from_user,
    shape_tag,
)

Progress = Callable[[float, str], None]
log = logging.getLogger(__name__)

# The post's six, in its order: the variants always in Compare's default list.
POST_VARIANTS = tuple(v.id for v in VARIANTS.values() if v.compare_default == "always")

# -- datasheet peaks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Peak:
    """Dense (no sparsity) peak TFLOP/s of one GPU model, as NVIDIA's datasheet states it."""

    device: str
    tflops: dict[str, float]  # dtype → dense TFLOP/s; a dtype left out has no tensor-core peak
    source: str


# Name patterns as torch.cuda.get_device_name() spells them ("NVIDIA H200", "NVIDIA H100 80GB
# HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L4", "Tesla T4"), first match wins. float32 is the
# FP32 (non-tensor-core) peak: PyTorch's default matmul precision does not use TF32. Dense =
# half of the datasheet's "with sparsity" tensor figure. Left out on purpose: A10G (AWS's part;
# NVIDIA publishes no datasheet for it), H100 NVL and H200 NVL (lower clocks, other figures).
PEAKS: list[tuple[re.Pattern[str], Peak]] = [
    (re.compile(r"\bH200\b(?!.*\bNVL\b)"),
     Peak("H200 SXM", {"bfloat16": 989.4, "float16": 989.4, "float32": 67.0},
          "NVIDIA H200 datasheet (BF16/FP16 1,979 with sparsity → 989.4 dense; FP32 67)")),
    (re.compile(r"\bH100\b.*\bPCIe\b", re.I),
     Peak("H100 PCIe", {"bfloat16": 756.0, "float16": 756.0, "float32": 51.0},
          "NVIDIA H100 datasheet, PCIe (BF16/FP16 1,513 with sparsity → 756 dense; FP32 51)")),
    (re.compile(r"\bH100\b(?!.*\bNVL\b).*(\bSXM|\bHBM3\b)"),
     Peak("H100 SXM", {"bfloat16": 989.4, "float16": 989.4, "float32": 67.0},
          "NVIDIA H100 datasheet, SXM (BF16/FP16 1,979 with sparsity → 989.4 dense; FP32 67)")),
    (re.compile(r"\bA100\b"),
     Peak("A100", {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5},
          "NVIDIA A100 datasheet (BF16/FP16 tensor 312 dense; FP32 19.5)")),
    (re.compile(r"\bL40S\b"),
     Peak("L40S", {"bfloat16": 362.05, "float16": 362.05, "float32": 91.6},
          "NVIDIA L40S datasheet (BF16/FP16 tensor 362.05 dense; FP32 91.6)")),
    (re.compile(r"\bL4\b"),
     Peak("L4", {"bfloat16": 121.0, "float16": 121.0, "float32": 30.3},
          "NVIDIA L4 datasheet (BF16/FP16 242 with sparsity → 121 dense; FP32 30.3)")),
    (re.compile(r"\bA10\b"),
     Peak("A10", {"bfloat16": 125.0, "float16": 125.0, "float32": 31.2},
          "NVIDIA A10 datasheet (BF16/FP16 tensor 125 dense; FP32 31.2)")),
    (re.compile(r"\bT4\b"),
     Peak("T4", {"float16": 65.0, "float32": 8.1},
          "NVIDIA T4 datasheet (FP16 tensor 65; FP32 8.1; no bf16 tensor cores)")),
]  # fmt: skip


def peak_entry(device_name: str) -> Peak | None:
    """The datasheet row for a device name, or None when the model is not in the table."""
    for pattern, peak in PEAKS:
        if pattern.search(device_name or ""):
            return peak
    return None


def peak_tflops(device_name: str, dtype: str) -> float | None:
    """Datasheet dense peak for (device, dtype); None when unknown (then no "% of peak")."""
    peak = peak_entry(device_name)
    return peak.tflops.get(dtype) if peak else None


def peaks_table() -> pd.DataFrame:
    """The datasheet table as the page shows it (so the source is on screen, not hidden)."""
    rows = [
        {"device": p.device, **{f"{k} TFLOP/s": v for k, v in p.tflops.items()}, "source": p.source}
        for _, p in PEAKS
    ]
    cols = ["device", "bfloat16 TFLOP/s", "float16 TFLOP/s", "float32 TFLOP/s", "source"]
    return pd.DataFrame(rows).reindex(columns=cols)


# -- results ------------------------------------------------------------------------------------

GLANCE_COLUMNS = [
    "variant", "status", "kernels/fwd", "GPU µs/fwd", "CPU µs/fwd", "bound", "peak MiB",
    "TFLOP/s", "% of peak", "rel. err", "ran", "dominant kernel", "decoded", "GPU busy %",
    "idle gaps", "launch delay µs", "CPU launch µs/fwd", "reason",
]  # fmt: skip


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
    trace_gz: Path | None = None
    table_txt: Path | None = None
    seconds: float = 0.0

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
    return compare_workloads(
        workloads, out_dir=out_dir, progress=progress, make_zip=make_zip, stop=stop
    )


def compare_workloads(
    workloads: Sequence[Workload],
    *,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    make_zip: bool = True,
    stop: Callable[[], bool] | None = None,
) -> CompareResult:
    """Profile validated workloads of one shape (a JobRequest's), one after another."""
    first = workloads[0]
    device = resolve_device(first.device)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="attnprof-compare-"))
    report = progress or (lambda fraction, text: None)
    runs: list[VariantRun] = []
    for i, workload in enumerate(workloads):
        cancelled(stop, out, made=out_dir is None)
        step = _scaled(report, i, len(workloads), workload.variant)
        step(0.0, "starting")
        runs.append(profile_one(workload, out / workload.variant, step))
    cancelled(stop, out, made=out_dir is None)  # cancelled during the last run: no zip, no page
    report(1.0, f"{len(workloads)} variants done")
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
    if make_zip:
        result.zip_path = compare_zip(result)
    return result


def cancelled(stop: Callable[[], bool] | None, out: Path, made: bool) -> None:
    """Between two runs of a job: end it if its client cancelled it, removing the folder it
    made (the runs so far and their traces are nobody's now)."""
    if stop is not None and stop():
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise JobCancelled(f"cancelled; {out.name} removed" if made else "cancelled")


def profile_one(workload: Workload, out_dir: Path, progress: Progress) -> VariantRun:
    """Run one variant and keep what the views need; errors become a status and a reason."""
    label = workload.spec.label
    try:
        result = run(workload, out_dir=out_dir, progress=progress)
    except VariantUnavailable as exc:
        return VariantRun(workload.variant, label, "unavailable", str(exc))
    except ConfigError as exc:
        return VariantRun(workload.variant, label, "refused", str(exc))
    except RunError as exc:
        return VariantRun(workload.variant, label, "failed", str(exc))
    except Exception as exc:  # raised before the run began (the runner turns its own into
        # RunError): a failure, logged, that must not lose the other variants
        log.exception("%s failed", workload)
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
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
        trace_gz=result.trace_gz,
        table_txt=result.table_txt,
        seconds=result.seconds,
    )


def timeline(spans: pd.DataFrame) -> pd.DataFrame:
    """What a mini-Gantt draws: GPU kernels/memcpy/memset and the attn_fwd CPU spans."""
    keep = (spans["kind"] == "gpu") & spans["category"].isin(["kernel", "memcpy", "memset"])
    keep |= (spans["kind"] == "cpu") & (spans["name"] == FORWARD)
    cols = ["lane", "kind", "name", "category", "start_us", "dur_us", "end_us", "step"]
    out = spans.loc[keep, cols].copy()
    out["lane"] = out["lane"].astype(str)
    return out.reset_index(drop=True)


def glance_table(runs: Iterable[VariantRun], device_name: str, dtype: str) -> pd.DataFrame:
    """The post's "at a glance" table, plus launch/idle figures; a row per variant asked for."""
    peak = peak_tflops(device_name, dtype)
    rows = []
    for r in runs:
        row: dict[str, Any] = {"variant": r.variant, "status": r.status, "reason": r.reason}
        s, ls = r.summary, r.launch
        if s is not None:
            on_gpu = s.gpu_us_per_forward is not None
            row.update(
                {
                    "kernels/fwd": s.kernels_per_forward if on_gpu else None,
                    "GPU µs/fwd": s.gpu_us_per_forward,
                    "CPU µs/fwd": s.cpu_us_per_forward,
                    "bound": bound(s.cpu_us_per_forward, s.gpu_us_per_forward),
                    "peak MiB": s.peak_mib,
                    "TFLOP/s": s.tflops,
                    "% of peak": 100 * s.tflops / peak
                    if (peak and s.tflops is not None and on_gpu)
                    else None,
                    "rel. err": s.rel_err,
                    "ran": s.ran,
                    "dominant kernel": s.dominant_kernel,
                    "decoded": s.dominant_decoded,
                    "reason": "; ".join(s.notes),
                }
            )
        if ls is not None and ls.busy_pct is not None:
            row.update(
                {
                    "GPU busy %": ls.busy_pct,
                    "idle gaps": ls.gaps,
                    "launch delay µs": ls.launch_delay_mean_us,
                    "CPU launch µs/fwd": ls.cpu_launch_us_per_forward,
                }
            )
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=GLANCE_COLUMNS)
    numeric = [
        "kernels/fwd", "GPU µs/fwd", "CPU µs/fwd", "peak MiB", "TFLOP/s", "% of peak",
        "rel. err", "GPU busy %", "launch delay µs", "CPU launch µs/fwd",
    ]  # fmt: skip
    table[numeric] = table[numeric].astype(float)
    table["idle gaps"] = table["idle gaps"].astype("Int64")
    return table


def bound(cpu_us: float | None, gpu_us: float | None) -> str:
    """CPU-bound when the CPU spends longer per forward than the GPU works (the post's test)."""
    if gpu_us is None or cpu_us is None or math.isnan(cpu_us) or math.isnan(gpu_us):
        return "n/a"
    return "CPU-bound" if cpu_us > gpu_us else "GPU-bound"


# -- downloads -----------------------------------------------------------------------------------


def compare_zip(result: CompareResult) -> Path:
    """One zip with every trace (.json.gz), operator table (.txt) and the tables as CSV."""
    entries: list[tuple[str, Path | str]] = [
        ("glance.csv", result.glance.to_csv(index=False)),
        ("glance.md", markdown(result.glance)),
        ("peaks.csv", peaks_table().to_csv(index=False)),
    ]
    for r in result.runs:
        if not r.ok:
            entries.append((f"{r.variant}/{r.status}.txt", r.reason + "\n"))
            continue
        if r.trace_gz is not None and r.trace_gz.exists():
            entries.append((f"{r.variant}/{r.trace_gz.name}", r.trace_gz))
        if r.table_txt is not None and r.table_txt.exists():
            entries.append((f"{r.variant}/{r.table_txt.name}", r.table_txt))
        if r.kernels is not None:
            entries.append((f"{r.variant}/kernels.csv", r.kernels.to_csv(index=False)))
        if r.launch is not None:
            entries.append((f"{r.variant}/launches.csv", r.launch.per_launch.to_csv(index=False)))
    tag = shape_tag(result.shape, result.device)
    return write_zip(entries, f"compare_{tag}.zip")


def write_zip(entries: Iterable[tuple[str, Path | str | bytes]], name: str) -> Path:
    """Write (name in zip, file or text) pairs into a zip in a fresh temp folder; its path."""
    path = Path(tempfile.mkdtemp(prefix="attnprof-zip-")) / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, content in entries:
            if isinstance(content, Path):
                stored = content.suffix == ".gz"  # already compressed
                zf.write(content, arcname, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
            else:
                zf.writestr(arcname, content)
    return path


def format_cell(v: Any, digits: int = 3) -> str:
    """One number as the tables print it: 3 significant digits, scientific when tiny or huge."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        if v != 0 and (abs(v) < 10 ** -(digits - 1) or abs(v) >= 1e7):
            return f"{v:.{digits - 1}e}"
        return f"{v:,.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def text_table(table: pd.DataFrame, max_width: int = 60) -> str:
    """Aligned plain text for a terminal: numbers formatted, long text cut."""
    shown = table.map(lambda v: _cut(format_cell(v), max_width))
    return shown.to_string(index=False)


def markdown(table: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table (pandas' to_markdown needs tabulate; this does not)."""

    def escaped(text: str) -> str:  # a bare | or newline would end the cell or the row
        return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    def cell(v: Any) -> str:
        return escaped(format_cell(v, digits))

    head = "| " + " | ".join(escaped(str(c)) for c in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *body]) + "\n"


# -- helpers -------------------------------------------------------------------------------------


def _scaled(report: Progress, i: int, n: int, name: str) -> Progress:
    def step(fraction: float, text: str) -> None:
        report((i + min(max(fraction, 0.0), 1.0)) / n, f"{name} ({i + 1}/{n}): {text}")

    return step


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


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
