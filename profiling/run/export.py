"""A profiled run's files: the Chrome trace (.json, then .json.gz) and key_averages as text,
and key_averages as the operator table.

The .json.gz is written on a worker thread while the run builds its tables (zlib releases the
GIL while it compresses); the run waits for it before it returns.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiling.analysis.columns import OPERATOR_COLUMNS
from profiling.analysis.summary import finite
from profiling.workload.spec import Workload


@dataclass
class Exported:
    """A run's files; the .json.gz is still being written until `gz_written` is done."""

    json: Path
    gz: Path
    txt: Path
    gz_written: futures.Future


def _gzip_pool() -> futures.ThreadPoolExecutor:
    return futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnprof-gzip")


GZIP_POOL = _gzip_pool()


def _new_gzip_pool_after_fork() -> None:
    """A forked child inherits the pool but not its thread: its jobs would never run."""
    global GZIP_POOL
    GZIP_POOL = _gzip_pool()


os.register_at_fork(after_in_child=_new_gzip_pool_after_fork)


def export(profiler, workload: Workload, device: str, out: Path) -> Exported:
    """The trace as .json, the key_averages table as .txt, and the .json.gz: zlib releases
    the GIL while it compresses, so the .gz is written while the run builds its tables."""
    tag = workload.tag(device)
    json_path, gz_path, txt_path = (out / f"{tag}{ext}" for ext in (".json", ".json.gz", ".txt"))
    profiler.export_chrome_trace(str(json_path))
    gz_written = GZIP_POOL.submit(gzip_file, json_path, gz_path)
    sort_by = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    try:
        txt_path.write_text(averages(profiler).table(sort_by=sort_by, row_limit=15))
    except BaseException:
        futures.wait([gz_written])
        raise
    return Exported(json_path, gz_path, txt_path, gz_written)


def gzip_file(source: Path, destination: Path) -> None:
    """The trace as .json.gz, the form the post's scripts keep."""
    with open(source, "rb") as plain, gzip.open(destination, "wb", compresslevel=6) as packed:
        shutil.copyfileobj(plain, packed)


def averages(profiler):
    """key_averages once per run: the .txt and the operator table both read it."""
    if getattr(profiler, "_attnprof_averages", None) is None:
        profiler._attnprof_averages = profiler.key_averages()
    return profiler._attnprof_averages


def operator_table(profiler, device: str) -> pd.DataFrame:
    """key_averages as a table: the numbers of the post's .txt, sortable.

    Built column-wise and sorted with numpy before the one DataFrame is made: pandas' sort,
    reset and round cost more than the table itself (docs/performance.md)."""
    events = list(averages(profiler))
    if not events:
        return pd.DataFrame()
    calls = np.array([event.count for event in events], dtype=np.int64)
    per_call = np.maximum(calls, 1)
    cpu_self = np.array([event.self_cpu_time_total for event in events], dtype=float)
    cpu_total = np.array([event.cpu_time_total for event in events], dtype=float)
    device_self = np.array(
        [getattr(event, "self_device_time_total", 0.0) for event in events], dtype=float
    )
    device_total = np.array(
        [getattr(event, "device_time_total", 0.0) for event in events], dtype=float
    )
    order = np.argsort(-(device_total if device == "cuda" else cpu_total), kind="stable")
    names = np.array([event.key for event in events], dtype=object)
    columns = [
        names,
        calls,
        cpu_self,
        cpu_total,
        cpu_total / per_call,
        device_self,
        device_total,
        device_total / per_call,
    ]
    return pd.DataFrame(
        {
            name: (column[order] if column.dtype == object else np.round(column[order], 3))
            for name, column in zip(OPERATOR_COLUMNS, columns, strict=True)
        }
    )


RUN_JSON = ".run.json"


def write_run_json(result: Any) -> None:
    """The run's figures beside its trace (`<tag>.run.json`): the summary, with the clock
    samples and the memory timeline's series, NaN written as null. A Compare's zip and the
    CLI's folder keep it."""
    doc = {"summary": result.summary.as_dict()}
    if result.clocks is not None:
        doc["clock_samples"] = result.clocks.as_dict().get("series", [])
    timeline = result.memory_timeline
    if timeline is not None:
        doc["memory_timeline"] = {"x": timeline.x, "x_label": timeline.x_label,
                                  "series_bytes": timeline.series}  # fmt: skip
    path = result.trace_gz.with_name(result.trace_gz.name.removesuffix(".json.gz") + RUN_JSON)
    path.write_text(json.dumps(finite(doc), indent=1, default=str))
    result.run_json = path
