"""What the page, the API and the CLI call once a result exists: its runs, as plain data, into
the store. Duck-typed on the results (ProfileResult, CompareResult, SweepResult; a model run's
ModelRun and its Sweep's points, issue 43), so this module imports neither torch nor the code
that made them.

Storing is a side effect of a click: a store that cannot be written (damaged, refused, a full
disk) is logged and said in the returned note, and never fails the run it would have kept.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.store import model_summary
from profiling.store.connection import StoreError
from profiling.store.handle import Store, open_store
from profiling.store.rows import RunData
from profiling.store.write import record

log = logging.getLogger(__name__)
FAILURES = (StoreError, sqlite3.Error, OSError, ValueError)
# what a Compare row (VariantRun) and a Sweep point (SweepPoint) hold under RunData's own names
AS_IS = ("status", "reason", "kernels", "roles", "roofline", "operators")


@dataclass
class Kept:
    """The ids of the runs stored, in order (None for one that was not), and what to say."""

    ids: list[str | None] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def keep(runs: Iterable[RunData], store: Store | str | None = "default") -> Kept:
    """Record each run in its own transaction; "default": the store location names."""
    kept = Kept()
    try:
        chosen = open_store() if store == "default" else store
    except ValueError as exc:  # ATTNPROF_STORE_MAX_BYTES that is not a number
        log.warning("run store: %s", exc)
        kept.notes.append(f"not stored: {exc}")
        return kept
    for run in runs:
        if chosen is None or not isinstance(chosen, Store):
            kept.ids.append(None)
            continue
        try:
            done = record(chosen, run)
        except FAILURES as exc:
            log.warning("run store %s: %s", chosen.path, exc)
            kept.ids.append(None)
            kept.notes.append(f"not stored: {exc}")
            continue
        kept.ids.append(done.run_id)
        kept.notes += done.notes(chosen.max_runs)
    kept.notes = list(dict.fromkeys(kept.notes))
    return kept


def _frame(rows: Any) -> pd.DataFrame | None:
    """A table given as a frame or as records (the page's summary JSON holds records)."""
    if isinstance(rows, pd.DataFrame):
        return rows
    return pd.DataFrame(rows) if rows else None


def _phase_kernels(result: Any) -> pd.DataFrame:
    """The kernel table as the page lists it: each phase's rows, the phase named."""
    phases = result.trace.phases
    if len(phases) < 2:
        return result.kernels
    return pd.concat(
        [phase.kernels.assign(phase=name) for name, phase in phases.items()], ignore_index=True
    )


def profile_run(result: Any, origin: str, roles: Any = None, roofline: Any = None) -> RunData:
    """A Profile run. The page passes the roles and roofline rows its view made (records or
    frames: no second pass); the CLI leaves them to be computed here."""
    if roles is None:
        roles = result.trace.roles()
    if roofline is None:
        from profiling.analysis.roofline_runs import (
            run_roofline,  # torch-free, duck-typed on the result
        )

        roofline = run_roofline(result)
    return RunData(
        kind="profile",
        origin=origin,
        config=result.config.as_dict(),
        status="ok",
        summary=result.summary.as_dict(),
        kernels=_phase_kernels(result),
        roles=_frame(roles),
        roofline=_frame(roofline),
        operators=result.operators,
        trace_gz=Path(result.trace_gz),
    )


def compare_runs(result: Any, origin: str) -> list[RunData]:
    """Each Compare row: the numbers where it ran, its status and reason where it did not."""
    return [_job_run("compare", origin, {**result.shape, "variant": row.variant}, row)
            for row in result.runs]  # fmt: skip


def sweep_runs(result: Any, origin: str) -> list[RunData]:
    """Each Sweep point (one variant at one length), run or not, with its reason."""
    return [_job_run("sweep", origin,
                     {**result.shape, "variant": point.variant, "seq_len": point.seq_len}, point)
            for point in result.points]  # fmt: skip


def _job_run(kind: str, origin: str, config: dict[str, Any], item: Any) -> RunData:
    """A Compare row or a Sweep point as a run: its device where it ran (what a point that did
    not run lacks is None)."""
    summary = getattr(item, "summary", None)
    if summary is not None:
        config["device"] = summary.device
    return RunData(
        kind=kind,
        origin=origin,
        config=config,
        summary=summary.as_dict() if summary else None,
        trace_gz=_path(item.trace_gz),
        **{name: getattr(item, name) for name in AS_IS},
    )


def _path(value: Any) -> Path | None:
    return Path(value) if value else None


def model_runs(result: Any, origin: str, kind: str = "model") -> list[RunData]:
    """Each implementation of a model run (a ModelRun, duck-typed): the figures where it ran
    (its summary: profiling.store.model_summary), its reason where it was refused or failed."""
    return [_model_run(result.workload, result, item, origin, kind) for item in result.runs]


def model_sweep_runs(points: Any, origin: str) -> list[RunData]:
    """Each (length, implementation) of a model Sweep; a length refused as a whole (memory,
    the CPU's budget) is kept once per implementation asked for, with its reason."""
    kept = []
    for point in points:
        if point.result is not None:
            kept += model_runs(point.result, origin, "model-sweep")
            continue
        for name in point.workload.get("implementations") or ():
            kept.append(_model_run(point.workload, None, None, origin, "model-sweep", name,
                                   point.refused))  # fmt: skip
    return kept


def _model_run(
    workload: dict[str, Any], result: Any, item: Any, origin: str, kind: str,
    name: str = "", refused: str = "",
) -> RunData:  # fmt: skip
    """One implementation of a model workload as a run: the model's fields beside the
    variants' (its implementation as the variant), the model's own text as its shape."""
    decode = workload.get("mode") == "decode"
    lengths = workload.get("lengths") or ()
    ragged = any(n < workload.get("seq_len", 0) for n in lengths)  # a full batch's are not kept
    config = {
        **{key: workload.get(key) for key in ("seq_len", "dtype", "batch", "mode", "steps",
                                             "preset", "layers")},
        "variant": item.id if item is not None else name, "causal": True,
        "timing": "eager",  # its steps run as they are: no CUDA graph, no L2 flush
        "device": result.device if result is not None else workload.get("device"),
        "lengths": ",".join(map(str, lengths)) if ragged else None,
        "new_tokens": workload.get("new_tokens") if decode else None,
    }  # fmt: skip
    if item is None:
        return RunData(kind, origin, config, "refused", refused, label=workload.get("text", ""))
    status = "ok" if item.ok else "oom" if "out of memory" in item.failed else (
        "unavailable" if item.refused else "failed")  # fmt: skip
    return RunData(
        kind=kind, origin=origin, config=config, status=status,
        reason=item.refused or item.failed,
        summary=model_summary.summary_of(result, item) if item.ok else None,
        trace_gz=_path(item.trace) if item.ok else None, label=result.text,
    )  # fmt: skip
