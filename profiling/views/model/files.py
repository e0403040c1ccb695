"""The files a model run hands over (issue 43): each implementation's trace under a readable
name (the Model tab's downloads, one per implementation, as the Profile tab's), and a model
Sweep's zip of every point's traces with its table (as the Sweep tab's).

A name is built from the workload's own fields only, reduced to letters, digits, `.`, `_` and
`-` (a stored row's text is a stranger's, and never makes a path).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.jobs.files import write_zip
from profiling.run.model.result import ModelRun


def _safe(text: str, fallback: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-")[:150] or fallback


def file_tag(values: Mapping[str, Any], seq_len: bool = True) -> str:
    """`tiny_2L_B4_S64_ragged_float32_prefill`: preset, decoder layers, batch, length (left out
    for a Sweep's zip), ragged or not, dtype and mode, from a workload or a stored row."""
    lengths = values.get("lengths")
    if isinstance(lengths, list | tuple):  # a workload's: ragged when one is short
        lengths = any(n < (values.get("seq_len") or 0) for n in lengths)
    parts = (values.get("preset"), f"{values.get('layers')}L", f"B{values.get('batch')}",
             f"S{values.get('seq_len')}" if seq_len else "", "ragged" if lengths else "",
             values.get("dtype"), values.get("mode"))  # fmt: skip
    return _safe("_".join(str(part) for part in parts if part), "model")


def _beside(source: Path, name: str) -> Path:
    """`source` under another name in its folder: a hard link (no copy), else a copy."""
    target = source.with_name(name)
    if not target.exists():
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
    return target


def trace_files(result: ModelRun) -> list[str]:
    """Each implementation that ran: its trace as `<implementation>_<tag>.json.gz`."""
    tag = file_tag(result.workload)
    return [
        str(_beside(Path(item.trace), f"{_safe(item.id, 'run')}_{tag}.json.gz"))
        for item in result.runs
        if item.ok and item.trace and Path(item.trace).is_file()
    ]


def sweep_zip(points: Sequence[Any], table: pd.DataFrame) -> Path | None:
    """One zip: every (length, implementation)'s trace under `S<length>/`, and the table as
    CSV; None when no point ran. `points`: profiling.jobs.model_sweep's (duck-typed: no torch)."""
    entries: list[tuple[str, Path | str]] = []
    for point in points:
        if point.result is None:
            continue
        tag = file_tag(point.result.workload)
        entries += [(f"S{point.seq_len}/{_safe(item.id, 'run')}_{tag}.json.gz", Path(item.trace))
                    for item in point.result.runs
                    if item.ok and item.trace and Path(item.trace).is_file()]  # fmt: skip
    if not entries:
        return None
    entries.append(("points.csv", table.to_csv(index=False)))
    return write_zip(entries, f"model_sweep_{file_tag(points[0].workload, seq_len=False)}.zip")
