"""Analyse: any uploaded torch.profiler Chrome trace → operator table, kernel table, summary.

An upload is untrusted: its size is checked before a byte is read, gzip expansion is bounded
(profiling.trace.model.read_bytes), and every way it can fail to be a trace is a TraceError with a
sentence a user can act on. A trace without GPU events is not an error: it is analysed as a
CPU-only trace and says so.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from profiling.analysis.columns import KERNEL_COLUMNS, TRACE_OPERATOR_COLUMNS
from profiling.analysis.launch import LaunchStats, launch_rows, launch_stats
from profiling.analysis.roofline_runs import phases_roofline, table_op_args
from profiling.analysis.summary import (
    ForwardStats,
    forward_spans,
    gpu_work,
    launched_within,
    per_forward,
)
from profiling.kernels.chains import table_spans
from profiling.kernels.names import kernel_table, with_reading
from profiling.kernels.roles import KernelSpans, role_table
from profiling.text_tables import count_text, counted
from profiling.trace.device import UNKNOWN, describe
from profiling.trace.events import EventArgs, TraceError, span_args, step_number
from profiling.trace.memory import collector_paused, small_pages
from profiling.trace.model import Trace, load
from profiling.trace.query import by_identity, is_in, operator_rows, own_calls

MAX_UPLOAD_BYTES = 100 * 1024**2  # the file as uploaded (gzip or not)
MAX_EXPANDED_BYTES = 1024**3  # the JSON once decompressed
CPU_ONLY = "no GPU events: a CPU-only trace"
_ENCODE = msgspec.json.Encoder().encode


@dataclass
class AnalyzeResult:
    """Everything the Analyse tab shows; plain data."""

    name: str
    summary: list[tuple[str, str]]  # (label, text) rows, as summary_rows gives for a run
    stats: ForwardStats
    launch: LaunchStats
    operators: pd.DataFrame  # TRACE_OPERATOR_COLUMNS: cpu_op and record_function spans per name
    kernels: pd.DataFrame  # KERNEL_COLUMNS
    kernel_scope: str
    spans: pd.DataFrame  # the trace model, for the Gantt
    lanes: list[str]
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    n_events: int = 0
    n_spans: int = 0
    skipped: int = 0
    has_gpu: bool = False
    notes: list[str] = field(default_factory=list)
    roles: pd.DataFrame = field(default_factory=pd.DataFrame)  # ROLE_COLUMNS, same scope
    roofline: pd.DataFrame = field(default_factory=pd.DataFrame)  # ROOFLINE_COLUMNS
    device_name: str = ""  # from the trace's device properties
    dtype: str = ""  # the one its recorded shapes use most (recorded_dtype); "": none recorded
    kernel_unit: str = "forward"  # what the kernel and role tables are per (columns.PER_HEADER)


def analyze(
    source: str | Path | bytes,
    max_upload_bytes: int = MAX_UPLOAD_BYTES,
    max_expanded_bytes: int = MAX_EXPANDED_BYTES,
    name: str | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> AnalyzeResult:
    """Read an uploaded trace within the limits and build the tables; raises TraceError.
    `progress(fraction, text)` hears how far the reading is (most of the time), then the tables."""
    size = _size(source)
    if size > max_upload_bytes:
        raise TraceError(
            f"the file is {bytes_text(size)}; the limit is {bytes_text(max_upload_bytes)} "
            "(a .json.gz is smaller; or profile fewer steps)"
        )
    if size == 0:
        raise TraceError("the file is empty")
    reading = None if progress is None else (lambda done: progress(0.9 * done, "reading the trace"))
    trace = load(source, max_bytes=max_expanded_bytes, progress=reading)
    if progress is not None:
        progress(0.9, f"building the tables of {len(trace.spans):,} spans")
    label = name or (Path(source).name if not isinstance(source, bytes) else "uploaded trace")
    return from_trace(trace, label)


def from_trace(trace: Trace, name: str = "trace") -> AnalyzeResult:
    """The Analyse views of an already parsed trace. The views that need nothing of each other
    run on a second thread beside the kernel views (numpy and pandas release the GIL in their
    loops: 1–2 s less at 10⁷ events, docs/performance.md §7.3); each only reads the trace.
    The cyclic collector and numpy's huge pages are off meanwhile, as for the parse
    (profiling.trace.memory)."""
    with collector_paused(), small_pages(), ThreadPoolExecutor(1) as beside:
        stats = beside.submit(per_forward, trace, own_run=False)
        launch = beside.submit(launch_stats, trace)
        operators = beside.submit(operator_table, trace)
        dtype = beside.submit(recorded_dtype, trace)
        scope, (per, unit), spans, kernels = _kernel_views(trace)
        used = trace.devices_ran_on
        device = str(used[0].get("name", "")) if used else ""
        roofline = phases_roofline(
            {"trace": spans},
            None,
            device,
            dtype.result() or ASSUMED_DTYPE,
            table_op_args(trace.spans),
        )
        roles = role_table(spans if trace.has_gpu else KernelSpans(), per)
        views = [future.result() for future in (stats, launch, operators, dtype)]
    notes = []
    if not trace.has_gpu:
        notes.append(CPU_ONLY)
        kernels = pd.DataFrame(columns=list(KERNEL_COLUMNS))
        scope = CPU_ONLY
    if trace.skipped:
        notes.append(f"{trace.skipped} complete events without a usable ts/dur were skipped")
    result = AnalyzeResult(
        name=name,
        summary=[],
        stats=views[0],
        launch=views[1],
        operators=views[2],
        kernels=kernels,
        kernel_scope=scope,
        kernel_unit=unit,
        roles=roles,
        roofline=roofline if trace.has_gpu else roofline.iloc[0:0],
        device_name=device,
        dtype=views[3],
        spans=trace.spans,
        lanes=list(trace.lanes),
        device_properties=used,
        n_events=trace.n_events,
        n_spans=len(trace.spans),
        skipped=trace.skipped,
        has_gpu=trace.has_gpu,
        notes=notes,
    )
    result.summary = summary_rows(result, trace)
    return result


def _kernel_views(trace: Trace) -> tuple[str, tuple[int, str], KernelSpans, pd.DataFrame]:
    """The GPU work the kernel table counts (per forward where the trace has attn_fwd spans),
    what it is divided by and its unit (columns.PER_HEADER), its spans with roles, and the
    kernel table (an upload: kernels read by their names)."""
    forwards = forward_spans(trace)
    if not forwards.empty and not (work := launched_within(trace, forwards)).empty:
        per = (len(forwards), "forward")
        scope = f"per forward: GPU work launched in the {counted(len(forwards), 'attn_fwd span')}"
    else:
        work, per = gpu_work(trace), (1, "trace")
        scope = "all GPU work in the trace (no attn_fwd spans), totals not per forward"
    spans = table_spans(trace.spans, work.index.to_numpy())
    kernels = kernel_table(work, per=per[0], own_run=False, roles=list(spans.roles))
    return scope, per, spans, kernels


ASSUMED_DTYPE = "bfloat16"  # the roof a trace without recorded shapes is judged against


def recorded_dtype(trace: Trace) -> str:
    """The dtype the roofline's solid roof is drawn for: the 16-bit or fp32 type the trace's
    recorded shapes use most; "" when it recorded none (the bounds are then judged against
    ASSUMED_DTYPE's roof, and the chart does not name a dtype the trace never gave)."""
    counts = {"bfloat16": 0, "float16": 0, "float32": 0}
    names = {"c10::BFloat16": "bfloat16", "c10::Half": "float16", "float": "float32"}
    cpu = ~is_in(trace.spans["kind"], "gpu")  # recorded shapes are CPU ops'
    codes, distinct = by_identity(trace.spans["args"].to_numpy()[cpu])  # shared per shape
    times_each = np.bincount(codes, minlength=len(distinct))
    found: Counter[bytes] = Counter()
    for args, times in zip(distinct, times_each.tolist(), strict=True):
        kinds = args.input_type if type(args) is EventArgs else span_args(args).get("Input type")
        found[_ENCODE(kinds)] += times
    for text, times in found.items():  # a few distinct lists
        kinds = msgspec.json.decode(text)
        for kind in kinds if isinstance(kinds, list) else ():
            if isinstance(kind, str) and kind in names:
                counts[names[kind]] += times
    return max(counts, key=counts.__getitem__) if any(counts.values()) else ""


def operator_sums(spans: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """Per name over the spans at `rows`: calls, total µs and self µs, counted
    as key_averages counts them (an op's redispatch to itself is one call, see own_calls).
    Summed with bincount over the names' codes, in order of first appearance as a groupby
    would give them, without a hash of each row's name (1.5 s at 10⁷ spans)."""
    # every ProfilerStep#N is one row "ProfilerStep*", as key_averages groups them
    codes, distinct = _operator_codes(spans["name"], rows)
    named = codes >= 0  # a missing name is left out, as groupby leaves it out
    calls = own_calls(spans, rows)[named]
    codes = codes[named]
    dur = spans["dur_us"].to_numpy(dtype=float)[rows][named]
    self_us = spans["self_us"].to_numpy(dtype=float)[rows][named]
    size = len(distinct)
    first = np.full(size, -1, dtype=np.int64)  # each code's first row, without a sort of them
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    present = np.flatnonzero(first >= 0)
    order = present[np.argsort(first[present], kind="stable")]  # in order of first appearance
    return pd.DataFrame(
        {
            "calls": np.bincount(codes[calls], minlength=size)[order],
            "total_us": np.bincount(codes[calls], weights=dur[calls], minlength=size)[order],
            "self_us": np.bincount(codes, weights=self_us, minlength=size)[order],
        },
        index=pd.Index(np.asarray(distinct, dtype=object)[order], name="name"),
    )


def _operator_codes(name: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A code per row into the operator names (-1: no name), every ProfilerStep#N one
    "ProfilerStep*" as key_averages groups them; decided once per distinct categorical name."""
    if isinstance(name.dtype, pd.CategoricalDtype):
        per_category = [_merged_name(c) for c in name.cat.categories] + [""]  # code -1: ""
        codes, distinct = pd.factorize(np.array(per_category, dtype=object))
        return codes[name.array.codes[rows]], np.asarray(distinct, dtype=object)
    merged = np.array([_merged_name(v) for v in name.to_numpy()[rows]], dtype=object)
    codes, distinct = pd.factorize(merged)
    return codes, np.asarray(distinct, dtype=object)


def _merged_name(name: Any) -> Any:
    return "ProfilerStep*" if step_number(name) >= 0 else name


def operator_table(trace: Trace) -> pd.DataFrame:
    """cpu_op and record_function spans per name (what key_averages lists on the CPU): calls,
    total and self µs, mean, share of all self time."""
    rows = operator_rows(trace.spans, annotations=True)
    if not len(rows):
        return pd.DataFrame(columns=list(TRACE_OPERATOR_COLUMNS))
    table = operator_sums(trace.spans, rows)
    table["mean_us"] = table["total_us"] / table["calls"]
    self_total = table["self_us"].sum()
    table["pct_self"] = 100 * table["self_us"] / self_total if self_total > 0 else 0.0
    table["operator"] = table.index.astype(str)
    table = table.sort_values("total_us", ascending=False, kind="stable")
    return table.reset_index(drop=True)[list(TRACE_OPERATOR_COLUMNS)]


def summary_rows(result: AnalyzeResult, trace: Trace) -> list[tuple[str, str]]:
    """The summary strip of an uploaded trace as (label, text) pairs."""
    st = result.stats
    gpu_lanes = _device_lanes(trace.spans)
    rows = [
        ("trace", result.name),
        ("events", f"{_many(result.n_events, 'event')} → {_many(result.n_spans, 'span')} "
                   f"in {_many(len(trace.lanes), 'lane')} ({gpu_lanes} GPU), "
                   f"{result.skipped} skipped"),
    ]  # fmt: skip
    for i, p in enumerate(result.device_properties):
        rows.append((f"device {p.get('id', i)}", describe(p)))
    if result.has_gpu and not result.device_properties:
        rows.append(("device", UNKNOWN))
    versions = [f"{k.replace('_', ' ')} {trace.meta[k]}" for k in _VERSION_KEYS if k in trace.meta]
    if versions:
        rows.append(("versions", ", ".join(versions)))
    # a trace without attn_fwd spans is counted per ProfilerStep: a training step is forward,
    # backward and optimiser together, so it is called a step, not a forward
    per, unit = ("attn_fwd span", "forward") if not forward_spans(trace).empty else (
        "ProfilerStep", "step")  # fmt: skip
    if st.forwards:
        rows.append((f"{unit}s", f"{st.forwards} ({per}s)"))
        rows.append((f"CPU µs / {unit}", f"{st.cpu_us:,.1f} (the {per})"))
    if result.has_gpu:
        if st.gpu_us is not None:
            rows.append((f"GPU µs / {unit}" if st.forwards else "GPU µs", f"{st.gpu_us:,.1f}"))
        rows.append(
            (f"kernels / {unit}" if st.forwards else "kernels",
             f"{count_text(st.kernels)} (+ {count_text(st.memcpy)} memcpy, "
             f"{count_text(st.memset)} memset)")
        )  # fmt: skip
        if st.gpu_us and st.forwards:
            bound = "CPU-bound" if st.cpu_us > st.gpu_us else "GPU-bound"
            rows.append(("bound", f"{bound} (CPU vs GPU time per {unit})"))
        if st.backend:
            rows.append(("SDPA backend", st.backend))
        if st.dominant:
            rows.append(("dominant kernel", with_reading(st.dominant, st.dominant_decoded)))
    if result.has_gpu:
        rows += launch_rows(result.launch)
    rows += [("note", n) for n in result.notes]
    return rows


def _device_lanes(spans: pd.DataFrame) -> int:
    """Lanes holding device work (an MTIA's as well as a GPU's, whatever the lane's label)."""
    lane = spans["lane"]
    if not isinstance(lane.dtype, pd.CategoricalDtype):
        return int(lane[is_in(spans["kind"], "gpu")].nunique())
    codes = lane.array.codes[is_in(spans["kind"], "gpu")]
    return int(np.count_nonzero(np.bincount(codes[codes >= 0], minlength=1)))


def _many(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


_VERSION_KEYS = ("cuda_runtime_version", "cuda_driver_version", "cupti_version")


def bytes_text(n: int) -> str:
    return (
        f"{n / 1024**2:,.1f} MiB".replace(".0 MiB", " MiB")
        if n >= 1024**2
        else f"{n / 1024:,.0f} KiB"
    )


def _size(source: str | Path | bytes) -> int:
    if isinstance(source, bytes):
        return len(source)
    try:
        return os.stat(source).st_size
    except OSError as exc:
        raise TraceError(f"cannot open trace: {exc.strerror}") from None
