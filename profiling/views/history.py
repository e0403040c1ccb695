"""What the History tab (and `python -m profiling history`) shows of the run store: the table
of stored runs, a Compare table of stored figures, the Diff of two stored runs (variants' or
model runs', issue 43, in any pairing: their traces are diffed alike), and one workload's trend
with its regressions.

Pure functions (no gradio, no torch): every figure comes from the store's columns, a Diff from
the stored traces. A reopened run's Profile view is profiling/views/reopen.py.

A stored trace is a stranger's bytes (a store may be imported): on the page it is read the way
an upload is, in profiling.views.upload_worker's bounded worker, under the same limits
(`stored_trace_figures` and `diff_stored` are that worker's tasks). The page names a store by its
file name only; the CLI, on the user's own machine, by its path.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiling.analysis.launch import LaunchStats
from profiling.analysis.summary import Summary
from profiling.gantt.spec import FigureSpec
from profiling.run import trace as run_trace
from profiling.store import Store, query
from profiling.store.model_summary import MODEL_KINDS
from profiling.store.trend import RULE, trend
from profiling.trace.events import TraceError
from profiling.user_values import ConfigError, show
from profiling.views import shared as views_shared
from profiling.views.diff import DiffPage, diff_page, escape_markdown
from profiling.views.model import stored as model_stored
from profiling.views.shared import escaped
from profiling.views.uploads import load_upload, size_text, upload_stat
from profiling.vocabulary import MODE_PHASES, measured_span

PERMALINK = "?run={}"
SUMMARY_FIELDS = {f.name for f in fields(Summary)}
MAX_COMPARED = 50  # runs in one stored Compare table
HISTORY_HEADERS = {"id": "Run", "created": "When (UTC)", "kind": "Kind", "variant": "Variant",
                   "shape": "Shape", "timing": "Timing", "steps": "Steps",
                   "device_name": "Device", "status": "Status", "gpu_us_median": "GPU µs",
                   "gpu_iqr": "GPU IQR µs", "cpu_us_median": "CPU µs", "tflops": "TFLOP/s",
                   "peak_mib": "Peak MiB", "ran": "Ran", "trace": "Trace"}  # fmt: skip
NUMBERS = {"gpu_us_median": 1, "gpu_iqr": 1, "cpu_us_median": 1, "tflops": 3, "peak_mib": 1}


def when(created: float) -> str:
    return dt.datetime.fromtimestamp(created, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def trace_state(run: dict[str, Any] | pd.Series) -> str:
    """kept, pruned (the size cap removed it; the row stays), or none (a run that did not run)."""
    if not run["trace_hash"]:
        return "none"
    return "pruned" if run["trace_pruned"] else "kept"


def history_view(runs: pd.DataFrame) -> pd.DataFrame:
    """query.list_runs's rows under readable headers, newest first, numbers rounded."""
    table = runs.copy()
    table["created"] = [when(t) for t in table["created"]]
    table["gpu_iqr"] = table["gpu_us_q3"] - table["gpu_us_q1"]
    table["trace"] = [trace_state(row) for _, row in table.iterrows()]
    for column, digits in NUMBERS.items():
        table[column] = pd.to_numeric(table[column], errors="coerce").round(digits)
    return table[list(HISTORY_HEADERS)].rename(columns=HISTORY_HEADERS)


def store_name(store: Store, full_path: bool = True) -> str:
    """How a message names the store: its path (the CLI), or its file name only (a public
    page must not show where the server keeps its files)."""
    return str(store.path) if full_path else store.path.name


def history_note(shown: int, total: int, store: Store | None, full_path: bool = True) -> str:
    if store is None:
        return "The run store is off (ATTNPROF_STORE=off): runs are not kept."
    more = f" (the newest {shown} listed)" if total > shown else ""
    return f"{total:,} stored runs match{more}. Store: `{store_name(store, full_path)}`."


COUNTS = {1: "one run", 2: "two runs"}
PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # the store's own ids (store.write.new_id)


def id_markdown(run_id: Any) -> str:
    """A run id in Markdown: as code where it is one the store makes, else every character
    that could be markup escaped (an imported store's id is a stranger's text)."""
    text = str(run_id)
    return f"`{text}`" if PLAIN_ID.fullmatch(text) else escape_markdown(text)


def picked_ids(raw: Any, at_least: int, at_most: int = MAX_COMPARED, to: str = "") -> list[str]:
    """Run ids from a caller: comma- or space-separated text, or a list of texts. `to` says
    what they are picked for ("to open"), in the message when their number is wrong."""
    if isinstance(raw, str):
        raw = raw.replace(",", " ").split()
    if not isinstance(raw, list | tuple) or not all(isinstance(x, str) for x in raw):
        raise ConfigError(f"runs are given as run ids (text), not {show(raw)}")
    ids = list(dict.fromkeys(x.strip() for x in raw if x.strip()))
    if not at_least <= len(ids) <= at_most:
        wanted = COUNTS.get(at_least, f"{at_least} runs") if at_least == at_most else (
            f"{at_least}–{at_most} different runs")  # fmt: skip
        raise ConfigError(f"pick {wanted}{' ' + to if to else ''} (got {len(ids)})")
    return ids


def stored_run(store: Store, run_id: Any) -> dict[str, Any]:
    """query.get_run, its "no such run" said with the store's file name only (the page's)."""
    try:
        return query.get_run(store, run_id)
    except query.NoSuchRun as missing:
        raise ConfigError(
            f"run {show(missing.run_id)} is not in this run store ({store_name(store, False)})"
        ) from None


def download_name(run: dict[str, Any]) -> str:
    """A stored trace's download name: the run's readable tag, as a Profile download's, and
    the start of its id (`naive_1_4_256_64_float32_causal_cpu_3steps_1a2b3c4d.json.gz`).
    Only letters, digits, `.`, `_` and `-` (an imported row's text never makes a path)."""
    from profiling.workload.spec import shape_tag  # torch: the page's, never the CLI's or worker's

    try:
        tag = f"{run['variant']}_{shape_tag(run, run.get('device_kind') or run['device'])}"
    except (KeyError, TypeError, ValueError):
        tag = "run"
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{tag}_{str(run['id'])[:8]}").strip(".-")
    return f"{safe[:150] or 'run'}.json.gz"


def stored_summary(run: dict[str, Any]) -> Summary:
    """The run's Summary as it was shown (keys a newer version added are left out)."""
    if not run.get("summary_json"):
        raise TraceError(f"run {run['id']} did not run ({run['status']}: {run['reason']})")
    found = json.loads(run["summary_json"])
    return Summary(**{k: v for k, v in found.items() if k in SUMMARY_FIELDS})


# -- Compare of stored runs ---------------------------------------------------------------------
COMPARED = {"id": "Run", "created": "When (UTC)", "device_name": "Device", "variant": "Variant",
            "shape": "Shape", "timing": "Timing", "status": "Status", "gpu_us_median": "GPU µs",
            "gpu_iqr": "GPU IQR µs", "cpu_us_median": "CPU µs", "vs_first": "× first",
            "kernels": "Kernels/step", "tflops": "TFLOP/s", "tbps": "TB/s",
            "peak_mib": "Peak MiB", "rel_err": "rel. err", "ran": "Ran",
            "dominant_kernel": "Dominant kernel", "sm_mhz_max": "SM MHz max",
            "throttled": "Throttled", "driver_version": "Driver", "cuda_version": "CUDA",
            "torch_version": "torch", "project_version": "Profiler"}  # fmt: skip


def _time_of(run: dict[str, Any]) -> float:
    """A run's median time per step: GPU µs where it has one, else CPU µs."""
    for name in ("gpu_us_median", "cpu_us_median"):
        if run.get(name) is not None:
            return float(run[name])
    return float("nan")


def compare_view(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """Stored runs side by side (any devices): their figures, and each one's time as a multiple
    of the first's (GPU µs where both have it, else CPU µs)."""
    first = _time_of(runs[0]) if runs else float("nan")
    rows = []
    for run in runs:
        row = {name: run.get(name) for name in COMPARED}
        row["created"] = when(run["created"])
        q1, q3 = run.get("gpu_us_q1"), run.get("gpu_us_q3")
        row["gpu_iqr"] = None if q1 is None or q3 is None else q3 - q1
        row["vs_first"] = _time_of(run) / first if first == first and first else None
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(COMPARED))
    for column in ("gpu_us_median", "gpu_iqr", "cpu_us_median", "peak_mib"):
        table[column] = pd.to_numeric(table[column], errors="coerce").round(1)
    table["vs_first"] = pd.to_numeric(table["vs_first"], errors="coerce").round(3)
    return table.rename(columns=COMPARED)


def compare_runs(store: Store, raw: Any) -> pd.DataFrame:
    picked = picked_ids(raw, 2, to="to compare")
    return compare_view([stored_run(store, run_id) for run_id in picked])


# -- Diff of two stored runs --------------------------------------------------------------------
def stored_trace(store: Store, run: dict[str, Any]) -> Path:
    """A run's kept trace, or a TraceError that says why there is none."""
    from profiling.store.traces import trace_path

    state = trace_state(run)
    if state == "none":
        raise TraceError(f"run {run['id']} has no trace: it did not run ({run['status']})")
    path = trace_path(store.traces, run["trace_hash"])
    if state == "pruned" or not path.is_file():
        raise TraceError(
            f"run {run['id']}'s trace was pruned (the store's size cap); its stored figures "
            "remain: select it with another run for a Compare table instead"
        )
    return path


def run_label(run: dict[str, Any]) -> str:
    """A stored run in a Diff's headers (a model run's says so: issue 43)."""
    if run["kind"] in MODEL_KINDS:
        return model_stored.run_label(run)
    return f"{run['variant']} · {run['id'][:6]}"


def diff_inputs(store: Store, raw: Any) -> tuple[Path, Path, str, str]:
    """The two picked runs' kept traces and their labels (a TraceError says why one has none)."""
    run_a, run_b = (stored_run(store, run_id) for run_id in picked_ids(raw, 2, 2, "to diff"))
    paths = stored_trace(store, run_a), stored_trace(store, run_b)
    return (*paths, run_label(run_a), run_label(run_b))


def diff_runs(store: Store, raw: Any) -> DiffPage:
    """The Diff view of two stored runs, from their kept traces, read here (the CLI's)."""
    return diff_page(*diff_inputs(store, raw))


def diff_stored(path_a: str, path_b: str, label_a: str, label_b: str) -> DiffPage:
    """The upload worker's task for the page: two stored traces read as uploads are."""
    return diff_page(load_upload(path_a, "A"), load_upload(path_b, "B"), label_a, label_b)


# -- a stored trace read for a reopened run, in the upload worker -------------------------------
@dataclass
class PhaseKernels:
    kernels: pd.DataFrame


@dataclass
class TraceFigures:
    """What a reopened run's Profile view reads of its trace (a RunTrace's launch statistics,
    roles, Gantt and kernel tables), made in the upload worker: plain data, so the server never
    holds the stored trace, and the figures are the ones profiling.run.trace makes of it."""

    kernels: pd.DataFrame
    launch: LaunchStats
    role_table: pd.DataFrame
    figure: FigureSpec
    phases: dict[str, PhaseKernels]

    def launch_stats(self) -> LaunchStats:
        return self.launch

    def roles(self) -> pd.DataFrame:
        return self.role_table

    def gantt(self, title: str | None = None) -> FigureSpec:
        """Built in the worker, with the run's title (stored_trace_figures's)."""
        return self.figure


def stored_trace_figures(path: str, mode: str, title: str) -> TraceFigures:
    """The upload worker's task: a stored trace checked and read under an upload's limits (its
    size on disk, its size expanded, the worker's memory and time), by the reader its run used."""
    if mode not in MODE_PHASES:
        raise TraceError(f"the stored run's mode {show(mode)} is not one this app knows")
    size = upload_stat(path, "the stored trace", "the stored trace is missing").st_size
    if size > views_shared.TRACE_MAX_UPLOAD_BYTES:
        limit = size_text(views_shared.TRACE_MAX_UPLOAD_BYTES)
        raise TraceError(f"the stored trace is {size_text(size)}; the limit is {limit}")
    trace = run_trace.read(path, measured_span(mode), MODE_PHASES[mode],
                           max_bytes=views_shared.TRACE_MAX_EXPANDED_BYTES)  # fmt: skip
    phases = {name: PhaseKernels(phase.kernels) for name, phase in trace.phases.items()}
    return TraceFigures(trace.kernels, trace.launch_stats(), trace.roles(), trace.gantt(title),
                        phases)  # fmt: skip


# -- one workload over time ---------------------------------------------------------------------
def trend_table(store: Store, run_id: Any) -> pd.DataFrame:
    """The trend of the workload of `run_id` on its device (store.trend's rule applied)."""
    return trend(query.workload_runs(store, stored_run(store, run_id)))


def trend_figure(points: pd.DataFrame, title: str) -> FigureSpec:
    """Median µs per step over time, each point's IQR as its error bar, regressions in red."""
    x = [when(t) for t in points["created"]]
    median = points["median_us"].to_numpy(dtype=float)
    basis = points["basis"].iloc[0] if len(points) else "GPU"
    error = {"type": "data", "symmetric": False,
             "array": (points["q3_us"] - points["median_us"]).tolist(),
             "arrayminus": (points["median_us"] - points["q1_us"]).tolist()}  # fmt: skip
    flagged = points["regression"].to_numpy(dtype=bool)
    data = [
        {"type": "scatter", "mode": "lines+markers", "name": "median (IQR bars)", "x": x,
         "y": median.tolist(), "error_y": error, "text": points["id"].tolist()},
        {"type": "scatter", "mode": "markers", "name": "regression",
         "x": list(np.asarray(x, dtype=object)[flagged]), "y": median[flagged].tolist(),
         "marker": {"color": "#d62728", "size": 14, "symbol": "x"}},
        {"type": "scatter", "mode": "lines", "name": "median of earlier runs", "x": x,
         "y": points["baseline_us"].tolist(), "line": {"dash": "dot"}},
    ]  # fmt: skip
    layout = {"title": {"text": title}, "xaxis": {"title": {"text": "run (UTC)"}},
              "yaxis": {"title": {"text": f"{basis} µs per step (median)"}},
              "height": 380, "legend": {"orientation": "h"}}  # fmt: skip
    return FigureSpec(data=data, layout=layout)


def trend_note(points: pd.DataFrame) -> str:
    flagged = points.loc[points["regression"], "id"].tolist()
    said = (f"**Regressions:** {', '.join(id_markdown(i) for i in flagged)}." if flagged
            else "No regression.")  # fmt: skip
    return f"{len(points)} runs of this workload on this device. {said}\n\n*Rule:* {RULE}"


def kept_html(ids: list[str | None], notes: list[str]) -> str:
    """Under a run's strip: where it is kept (its permalink), or why it was not."""
    links = [f'<a href="{PERMALINK.format(i)}">{escaped(i)}</a>' for i in ids if i]
    parts = [f"kept in History as run {', '.join(links)}"] if links else []
    parts += [escaped(note) for note in notes]
    return f'<div class="ap-extra" id="kept">{" · ".join(parts)}</div>' if parts else ""


def mark_kept(shown: Any, kept: Any) -> None:
    """A Profile page told its run's id (summary JSON "run_id", and a line under the strip)."""
    shown.summary["run_id"] = kept.ids[0] if kept.ids else None
    shown.strip += kept_html(kept.ids, kept.notes)
