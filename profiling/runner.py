"""One profiled run, the way the post's scripts do it: inputs, warm-up, profile, export.

This is the only module that starts torch.profiler. A process-wide lock keeps one run at a time
(two profilers cannot run at once, and two runs would share one GPU's timings). It returns
plain, picklable data — paths, DataFrames, a Summary, the trace read once (run_trace) — so it
can cross a ZeroGPU worker boundary.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import logging
import math
import os
import shutil
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attention import Built, Problem, VariantUnavailable
from profiling import run_trace
from profiling.columns import OPERATOR_COLUMNS
from profiling.memory_estimate import REFERENCE_CHUNK, check_memory, reference_chunk
from profiling.run_trace import RunTrace
from profiling.summary import Summary, attention_flops, flops_convention
from profiling.vocabulary import FORWARD
from profiling.workload import WAIT, WARMUP, ConfigError, Workload, resolve_device

Progress = Callable[[float, str], None]
log = logging.getLogger(__name__)
_LOCK = threading.Lock()
SEED = 0
REFERENCE_FLOPS = {"cuda": 2e12, "cpu": 4e9}  # float64 work we allow the reference, per device


class RunError(RuntimeError):
    """The run started but failed (OOM, a kernel error, a build that does not load): the message
    names the error's class; the traceback is in the log; memory has been released."""


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


def run(
    workload: Workload, out_dir: str | Path | None = None, progress: Progress | None = None
) -> ProfileResult:
    """Validate, then profile `workload` once; raises ConfigError, VariantUnavailable or
    RunError."""
    workload = workload.validated()
    report = progress or (lambda fraction, text: None)
    with _LOCK:
        return _run_locked(workload, out_dir, report)


def _run_locked(workload: Workload, out_dir: str | Path | None, report: Progress) -> ProfileResult:
    began = time.perf_counter()
    device = resolve_device(workload.device)
    variant = workload.spec
    try:
        reason = variant.unavailable(device, workload.torch_dtype)
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
        result = _attempt(workload, variant, problem, device, out, report, spare)
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
    report(1.0, "done")
    return result


def _attempt(
    workload, variant, problem: Problem, device: str, out: Path, report, spare: int
) -> ProfileResult:
    report(0.05, "allocating inputs")
    tensors = _inputs(workload, device, variant.layout)
    built = variant.build(problem)  # raises VariantUnavailable where a known rule refuses
    report(0.15, f"warm-up ({variant.warmup_calls} calls)")
    prof = _profile(workload, built, variant, tensors, device, report)
    peak = torch.cuda.max_memory_allocated() / 1024**2 if device == "cuda" else None
    report(0.7, "exporting the trace")
    paths = _export(prof, workload, device, out)
    try:
        report(0.8, "reference check in float64, parsing the trace")
        # The reference's GPU work is queued first and read last, so it runs while the CPU
        # parses.
        reference = _relative_error(tensors, workload, variant.layout, device, spare)
        result = _result(workload, built, prof, paths, peak, reference, device)
    finally:
        futures.wait([paths.gz_written])  # no writer left behind in a folder about to go
    try:
        paths.gz_written.result()
    except OSError as exc:  # a full disk: a failed run, cleaned up like one
        raise RunError(f"writing {paths.gz.name} failed: {exc.strerror or exc}") from None
    return result


def _inputs(workload: Workload, device: str, layout: str) -> dict[str, torch.Tensor]:
    """Fixed-seed q, k, v in the variant's layout, as the post's scripts create them."""
    gen = torch.Generator(device=device).manual_seed(SEED)
    if layout == "bhsd":
        shape = (workload.batch, workload.heads, workload.seq_len, workload.head_dim)
    else:
        shape = (workload.batch, workload.seq_len, workload.heads, workload.head_dim)
    make = lambda: torch.randn(shape, generator=gen, device=device, dtype=workload.torch_dtype)  # noqa: E731
    return {"q": make(), "k": make(), "v": make()}


def _profile(workload, built: Built, variant, t: dict, device: str, report: Progress):
    q, k, v = t["q"], t["k"], t["v"]
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad(), variant.context():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                for _ in range(variant.warmup_calls):
                    t["out"] = built.forward(q, k, v)
                sync()
            except RuntimeError as exc:
                if isinstance(exc, torch.OutOfMemoryError) or not variant.declines(exc):
                    raise  # a failure, not the library refusing this input
                hints = "; ".join(dict.fromkeys(str(w.message).splitlines()[0] for w in caught))
                detail = f" ({hints})" if hints else ""
                raise VariantUnavailable(
                    f"{variant.id} cannot run {workload.shape_text()} here: "
                    f"{str(exc).splitlines()[0]}{detail}"
                ) from exc
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        report(0.3, f"profiling {workload.total_steps} steps ({workload.steps} active)")
        with profile(
            activities=activities,
            schedule=schedule(wait=WAIT, warmup=WARMUP, active=workload.steps, repeat=1),
            record_shapes=False,
            profile_memory=False,
            with_stack=False,
        ) as prof:
            for _ in range(workload.total_steps):
                with record_function(FORWARD):
                    t["out"] = built.forward(q, k, v)
                prof.step()
            sync()
    return prof


@dataclass
class Exported:
    """A run's files; the .json.gz is still being written until `gz_written` is done."""

    json: Path
    gz: Path
    txt: Path
    gz_written: futures.Future


def _gzip_pool() -> futures.ThreadPoolExecutor:
    return futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnprof-gzip")


_GZIP = _gzip_pool()


def _new_gzip_pool_after_fork() -> None:
    """A forked child inherits the pool but not its thread: its jobs would never run."""
    global _GZIP
    _GZIP = _gzip_pool()


os.register_at_fork(after_in_child=_new_gzip_pool_after_fork)


def _export(prof, workload: Workload, device: str, out: Path) -> Exported:
    """The trace as .json, the key_averages table as .txt, and the .json.gz: zlib releases
    the GIL while it compresses, so the .gz is written while the run builds its tables."""
    tag = workload.tag(device)
    json_path, gz_path, txt_path = (out / f"{tag}{ext}" for ext in (".json", ".json.gz", ".txt"))
    prof.export_chrome_trace(str(json_path))
    gz_written = _GZIP.submit(_gzip, json_path, gz_path)
    sort_by = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    try:
        txt_path.write_text(_averages(prof).table(sort_by=sort_by, row_limit=15))
    except BaseException:
        futures.wait([gz_written])
        raise
    return Exported(json_path, gz_path, txt_path, gz_written)


def _gzip(src_path: Path, dst_path: Path) -> None:
    """The trace as .json.gz, the form the post's scripts keep."""
    with open(src_path, "rb") as src, gzip.open(dst_path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)


def _averages(prof):
    """key_averages once per run (the .txt and the operator table both read it; ~8 ms each)."""
    if getattr(prof, "_attnprof_averages", None) is None:
        prof._attnprof_averages = prof.key_averages()
    return prof._attnprof_averages


def operator_table(prof, device: str) -> pd.DataFrame:
    """key_averages as a table: the numbers of the post's .txt, sortable.

    Built column-wise and sorted with numpy before the one DataFrame is made (pandas' sort,
    reset and round on a 30-row frame cost ~1 ms a run)."""
    events = list(_averages(prof))
    if not events:
        return pd.DataFrame()
    calls = np.array([e.count for e in events], dtype=np.int64)
    per = np.maximum(calls, 1)
    cpu_self = np.array([e.self_cpu_time_total for e in events], dtype=float)
    cpu_total = np.array([e.cpu_time_total for e in events], dtype=float)
    dev_self = np.array([getattr(e, "self_device_time_total", 0.0) for e in events], dtype=float)
    dev_total = np.array([getattr(e, "device_time_total", 0.0) for e in events], dtype=float)
    order = np.argsort(-(dev_total if device == "cuda" else cpu_total), kind="stable")
    columns = [
        np.array([e.key for e in events], dtype=object), calls, cpu_self, cpu_total,
        cpu_total / per, dev_self, dev_total, dev_total / per,
    ]  # fmt: skip
    return pd.DataFrame(
        {
            name: (col[order] if col.dtype == object else np.round(col[order], 3))
            for name, col in zip(OPERATOR_COLUMNS, columns, strict=True)
        }
    )


def _relative_error(
    t: dict, workload: Workload, layout: str, device: str, spare: int = 0
) -> Callable[[], tuple[float, str]]:
    """‖out − ref‖ / ‖ref‖ against float64 attention, in chunks that never hold the S² matrix.

    Batched over (batch, head) pairs with sums kept on the device: one sync, not one per chunk
    (that loop cost 46 ms at the post's shape on the H200). A chunk grows with the `spare`
    bytes the memory check left over, up to 1 GiB of scores: each chunk costs ~12 launches
    whatever its size, and at the post's shape four 256 MiB chunks were ~2 ms of a 25 ms run.
    The work is queued here and the returned function reads the result, so the caller can
    parse the trace in between.
    """
    out, q, k, v = t["out"], t["q"], t["k"], t["v"]
    if layout == "bshd":
        out, q, k, v = (x.transpose(1, 2) for x in (out, q, k, v))
    b, h, s, d = q.shape
    pairs = b * h
    keep = max(1, min(pairs, int(REFERENCE_FLOPS[device] // (4.0 * s * s * d))))
    out, q, k, v = (x.reshape(pairs, s, d)[:keep] for x in (out, q, k, v))
    # float64 scores per chunk; the chunk also holds their softmax and float64 copies of its
    # q, k, v and out, under 3x the scores' bytes in all
    budget = int(min(REFERENCE_CHUNK[1], max(REFERENCE_CHUNK[0], spare // (3 * 8))))
    rows, group = reference_chunk(s, keep, budget)  # the memory estimate counts the same chunk
    sums: torch.Tensor | None = None  # ‖out − ref‖², ‖ref‖² (no zeros to start: one launch)
    for lo in range(0, s, rows):
        hi = min(s, lo + rows)
        if workload.causal:  # additive mask for these query rows: -inf where key > query
            bias = torch.full((hi - lo, s), float("-inf"), dtype=torch.float64, device=q.device)
            bias = bias.triu_(lo + 1)
        else:
            bias = torch.zeros((hi - lo, s), dtype=torch.float64, device=q.device)
        for p0 in range(0, keep, group):
            o, qq = (x[p0 : p0 + group, lo:hi].to(torch.float64) for x in (out, q))
            kk, vv = (x[p0 : p0 + group].to(torch.float64) for x in (k, v))
            scores = torch.baddbmm(bias, qq, kk.transpose(1, 2), alpha=d**-0.5)  # (G, rows, S)
            r = torch.bmm(torch.softmax(scores, dim=-1), vv)
            diff, r = (o - r).reshape(-1), r.reshape(-1)
            part = torch.stack([torch.dot(diff, diff), torch.dot(r, r)])
            sums = part if sums is None else sums + part
    note = (
        "all heads"
        if keep == pairs
        else f"{keep} of {pairs} (batch, head) pairs, to bound the cost"
    )
    assert sums is not None  # at least one chunk: s, keep ≥ 1

    def finish() -> tuple[float, str]:  # the ratio on the host: four fewer launches
        err, ref = sums.tolist()
        return (math.sqrt(err / ref) if ref > 0 else float("nan")), note  # no ‖ref‖: undefined

    return finish


def _result(config, built: Built, prof, paths, peak, reference, device) -> ProfileResult:
    trace = run_trace.read(paths.json)
    stats = trace.stats
    flops = attention_flops(
        config.batch, config.heads, config.seq_len, config.head_dim, config.causal
    )
    if device == "cuda" and stats.gpu_us:
        tflops = flops / (stats.gpu_us * 1e-6) / 1e12
        basis = f"GPU time; {flops_convention(config.causal)}"
    else:
        tflops = flops / (stats.cpu_us * 1e-6) / 1e12 if stats.cpu_us > 0 else None
        basis = f"CPU time of attn_fwd (no GPU); {flops_convention(config.causal)}"
    ran = config.spec.ran(built, stats.backend)  # declared, or read from the trace
    operators = operator_table(prof, device)
    rel_err, rel_note = reference()
    notes = [n for n in (built.note,) if n]
    if stats.forwards != config.steps:
        notes.append(f"expected {config.steps} attn_fwd spans in the trace, found {stats.forwards}")
    summary = Summary(
        variant=config.variant,
        label=config.spec.label,
        config=config.as_dict(),
        device=device,
        device_name=torch.cuda.get_device_name() if device == "cuda" else _cpu_name(),
        torch_version=torch.__version__,
        ran=ran,
        forwards=stats.forwards,
        kernels_per_forward=stats.kernels,
        memcpy_per_forward=stats.memcpy,
        memset_per_forward=stats.memset,
        gpu_us_per_forward=stats.gpu_us,
        cpu_us_per_forward=stats.cpu_us,
        cpu_us_range=list(stats.cpu_us_range or ()),
        cpu_bound=(stats.cpu_us > stats.gpu_us) if stats.gpu_us else None,
        peak_mib=peak,
        flops_per_forward=flops,
        tflops=tflops,
        tflops_basis=basis,
        rel_err=rel_err,
        rel_err_note=rel_note,
        dominant_kernel=stats.dominant,
        dominant_decoded=stats.dominant_decoded,
        notes=notes,
    )
    return ProfileResult(
        config=config,
        summary=summary,
        operators=operators,
        kernels=trace.kernels,
        trace_json=paths.json,
        trace_gz=paths.gz,
        table_txt=paths.txt,
        trace=trace,
    )


def _unavailable_text(variant: str, exc: VariantUnavailable) -> str:
    """The rule's words, naming the variant once (a loader's message does not name it)."""
    text = str(exc)
    return text if text.startswith(f"{variant} ") else f"{variant} is unavailable here: {text}"


def _failure_text(exc: Exception) -> str:
    """The error's class and first line (ours, RunError, is already worded for the user)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, RunError):
        return first
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _release(device: str, collect: bool) -> None:
    """After an OOM: drop every reference (a collection pass) and hand cached blocks back."""
    if collect:
        gc.collect()
    if device == "cuda":
        with contextlib.suppress(RuntimeError):
            torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return "CPU · " + line.split(":", 1)[1].strip()
    return "CPU"


__all__ = ["ConfigError", "ProfileResult", "RunError", "VariantUnavailable", "run"]
