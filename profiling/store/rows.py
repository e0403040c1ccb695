"""A run as the store's rows: its real columns, each phase's figures, and the child tables.

Input is plain data only (RunData: the Workload's fields, the Summary as a dict, DataFrames),
so the store never needs torch or the objects that made the run. Every figure the issue names
is a column here; the whole Summary is kept beside them (table summaries) so a reopened run shows
exactly what the run showed, including its notes.
"""

from __future__ import annotations

import json
import math
import re
import socket
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.summary import finite
from profiling.store.model_summary import MODEL_KINDS
from profiling.store.model_summary import figures as model_figures
from profiling.text_tables import shape_text

WORKLOAD_FIELDS = ("variant", "seq_len", "dtype", "batch", "heads", "head_dim", "causal",
                   "device", "steps", "mode", "kv_heads", "q_len", "window", "timing")  # fmt: skip
# The fields that make two runs "the same workload" on a trend (the device is its own filter)
TREND_FIELDS = tuple(name for name in WORKLOAD_FIELDS if name != "device")
# a model run's own workload (issue 43; schema v3), beside the fields above (NULL for a variant's)
MODEL_FIELDS = ("preset", "layers", "lengths", "new_tokens")
KERNEL_FIELDS = (
    "phase",
    "kernel",
    "role",
    "category",
    "decoded",
    "count",
    "total_us",
    "pct_gpu",
    "mean_us",
    "min_us",
    "max_us",
    "registers_per_thread",
    "shared_memory",
    "grid",
    "block",
    "occupancy_pct",
    "occupancy_note",
    "name",
)
ROLE_FIELDS = ("phase", "role", "us", "pct_gpu", "calls", "kernels")
ROOFLINE_FIELDS = ("kernel", "role", "phase", "calls", "mean_us", "flop_per_call",
                   "bytes_per_call", "source", "tflops", "tbps", "intensity", "bound", "roof",
                   "total_us", "name")  # fmt: skip
# counts in columns the schema declared REAL (v2's roofline): read back as the integers written,
# so a reopened run's summary JSON equals the one the page showed (3, not 3.0)
WHOLE_NUMBER_FIELDS = {"roofline": ("calls",)}
OPERATOR_FIELDS = ("operator", "calls", "cpu_self_us", "cpu_total_us", "cpu_avg_us",
                   "device_self_us", "device_total_us", "device_avg_us")  # fmt: skip
PHASE_FIELDS = ("phase", "gpu_us", "gpu_us_median", "gpu_us_q1", "gpu_us_q3", "cpu_us",
                "cpu_us_median", "cpu_us_q1", "cpu_us_q3", "kernels", "flops", "tflops",
                "dominant_kernel")  # fmt: skip
MACHINE_FIELDS = ("compute_capability", "device_memory_gib", "gpu_count", "driver_version",
                  "cuda_version", "triton_version")  # Summary.machine's keys  # fmt: skip
SAME_NAMED = ("tbps", "bytes_moved", "intensity", "pct_peak_tflops", "pct_peak_bandwidth",
              "roofline_bound", "cpu_bound", "peak_mib", "rel_err", "dominant_kernel",
              "dominant_decoded")  # Summary fields stored under their own name  # fmt: skip


@dataclass
class RunData:
    """One run as plain data: what the page, the API or the CLI made (kind: profile, compare,
    sweep; model, model-sweep: one implementation of a model run), from where (origin: page,
    cli, import), and how it ended."""

    kind: str
    origin: str
    config: dict[str, Any]  # every Workload field
    status: str  # ok | unavailable | refused | failed | oom | skipped
    reason: str = ""
    summary: dict[str, Any] | None = None  # Summary.as_dict() when it ran
    kernels: pd.DataFrame | None = None
    roles: pd.DataFrame | None = None
    roofline: pd.DataFrame | None = None
    operators: pd.DataFrame | None = None
    trace_gz: Path | None = None
    children: dict[str, list[tuple]] = field(default_factory=dict)  # set by child_rows
    label: str = ""  # the shape as History lists it, where the workload says it (a model's)


@cache
def project_version() -> str:
    """This tool's version, from pyproject.toml (the repository is the app; tomllib is 3.11+)."""
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    try:
        found = re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.MULTILINE)
    except OSError:
        return ""
    return found.group(1) if found else ""


def plain(value: Any) -> Any:
    """A value SQLite stores as itself: NaN and infinity as NULL, numpy scalars as Python's."""
    if value is None or isinstance(value, str | bytes):
        return value
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    return str(value)


def workload_key(config: dict[str, Any]) -> str:
    """The trend's key: every Workload field but the device, in a fixed order; a model run's
    (it names a preset) adds the model's own fields, so it never joins a variant's trend."""
    key = [config.get(name) for name in TREND_FIELDS]
    if config.get("preset") is not None:
        key = ["model", *key, *(config.get(name) for name in MODEL_FIELDS)]
    return json.dumps(key)


def _spread(summary: dict[str, Any], which: str) -> dict[str, Any]:
    found = (summary.get("step_spread") or {}).get(which) or {}
    return {f"{which}_median": found.get("median"), f"{which}_q1": found.get("q1"),
            f"{which}_q3": found.get("q3")}  # fmt: skip


def _clocks(summary: dict[str, Any]) -> dict[str, Any]:
    clocks = summary.get("gpu_clocks") or {}
    names = ("sm_mhz_min", "sm_mhz_max", "mem_mhz_min", "mem_mhz_max", "power_w_mean",
             "power_w_max", "temp_c_max")  # fmt: skip
    found = {name: clocks.get(name) for name in names}
    found["throttled"] = ", ".join(clocks.get("throttled") or []) or None
    found["clock_warning"] = clocks.get("warning")
    return found


def _machine(summary: dict[str, Any]) -> dict[str, Any]:
    machine = summary.get("machine") or {}
    return {
        "device_kind": summary.get("device"),
        "device_name": summary.get("device_name"),
        "torch_version": summary.get("torch_version"),
        **{name: machine.get(name) for name in MACHINE_FIELDS},
    }


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    grads = summary.get("grad_err") or {}
    saved = summary.get("saved_extra_bytes")
    return {
        "ran": summary.get("ran"), "forwards": summary.get("forwards"),
        "gpu_us": summary.get("gpu_us_per_forward"), **_spread(summary, "gpu_us"),
        "cpu_us": summary.get("cpu_us_per_forward"), **_spread(summary, "cpu_us"),
        "kernels": summary.get("kernels_per_forward"),
        "memcpy": summary.get("memcpy_per_forward"),
        "memset": summary.get("memset_per_forward"),
        "flops": summary.get("flops_per_forward"), "tflops": summary.get("tflops"),
        **{name: summary.get(name) for name in SAME_NAMED},
        "saved_mib": None if saved is None else saved / 2**20,
        **{f"grad_err_{name}": grads.get(name) for name in ("dq", "dk", "dv")},
        **_clocks(summary), **_machine(summary),
    }  # fmt: skip


def run_columns(data: RunData, run_id: str, created: float, host: str, space: str) -> dict:
    """The runs row: id, time, where from, the workload, status, machine, figures, summary
    (a model run's figures read from its own summary: profiling.store.model_summary)."""
    config = {name: data.config.get(name) for name in (*WORKLOAD_FIELDS, *MODEL_FIELDS)}
    summary = data.summary or {}
    model = data.kind in MODEL_KINDS
    found = (
        (model_figures(summary, MACHINE_FIELDS) if model else _figures(summary)) if summary else {}
    )
    columns = {
        "id": run_id, "created": created, "kind": data.kind, "origin": data.origin,
        "host": host, "origin_space": space, "workload_key": workload_key(config),
        "shape": data.label or shape_text(config), **config, "status": data.status,
        "reason": data.reason, "project_version": project_version(),
        "device_kind": "cuda" if config.get("device") == "cuda" else None, **found,
    }  # fmt: skip
    return {name: plain(value) for name, value in columns.items()}


def phase_rows(summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each phase's figures per step (forward, backward; one for a forward run)."""
    rows = []
    for phase in (summary or {}).get("phases") or []:
        spread = {"step_spread": phase.get("spread") or {}}
        rows.append({
            "phase": phase.get("phase"), "gpu_us": phase.get("gpu_us_per_forward"),
            **_spread(spread, "gpu_us"), "cpu_us": phase.get("cpu_us"),
            **_spread(spread, "cpu_us"), "kernels": phase.get("kernels_per_forward"),
            "flops": phase.get("flops"), "tflops": phase.get("tflops"),
            "dominant_kernel": phase.get("dominant_kernel"),
        })  # fmt: skip
    return rows


def frame_rows(frame: pd.DataFrame | None, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """A table's rows under the store's column names (a missing column stored as NULL); built
    column by column (DataFrame.to_dict per row cost ~10 ms of a click's budget of 5)."""
    if frame is None or frame.empty:
        return []
    n = len(frame)
    columns = {
        name: [plain(v) for v in frame[name].tolist()] if name in frame.columns else [None] * n
        for name in fields
    }
    return [
        dict(zip(fields, values, strict=True)) for values in zip(*columns.values(), strict=True)
    ]


def child_rows(data: RunData) -> dict[str, list[dict[str, Any]]]:
    """Every child table's rows for one run."""
    summary = data.summary
    return {
        # strict JSON: a NaN figure (a rel_err of an overflowed output) is null, as its column
        "summaries": [{"summary_json": json.dumps(finite(summary), default=str, allow_nan=False)}]
        if summary
        else [],
        "phases": phase_rows(data.summary),
        "kernels": frame_rows(data.kernels, KERNEL_FIELDS),
        "roles": frame_rows(data.roles, ROLE_FIELDS),
        "roofline": frame_rows(data.roofline, ROOFLINE_FIELDS),
        "operators": frame_rows(data.operators, OPERATOR_FIELDS),
    }


@cache
def host_name() -> str:
    return socket.gethostname()
