"""The allocator's history around one measured step (issue 23): recorded, saved as the pickle
PyTorch's memory visualiser opens (https://pytorch.org/memory_viz), and built into a timeline.

The step is the eager one, also in a cuda-graph run: a replay allocates nothing (its memory was
taken from the graph's pool at capture and sits in the baseline). The peak statistic is reset
before the step, so `torch.cuda.max_memory_allocated` afterwards is the step's own peak, the
figure the timeline's peak is checked against.
"""

from __future__ import annotations

import linecache
import logging
import pickle
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from profiling.analysis import memory_timeline
from profiling.workload.spec import Workload

log = logging.getLogger(__name__)
MAX_ENTRIES = 50_000  # allocator events kept; a step of any variant here makes a few hundred
SUFFIX = ".memory.pickle"


def record(
    workload: Workload, step: Callable[[dict], None], tensors: dict, out: Path, tag: str
) -> tuple[Path | None, dict[str, Any], memory_timeline.Timeline | None]:
    """(the snapshot's file, the timeline's figures, the timeline) of one step; advisory: a
    failure is logged and said in the figures, never a failed run."""
    try:
        snapshot, peak = _recorded(step, tensors)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # private API: it may change between torch versions
        log.warning("memory history could not be recorded", exc_info=True)
        traceback.clear_frames(exc.__traceback__)
        return None, {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}, None
    _annotate(snapshot)
    path = out / f"{tag}{SUFFIX}"
    with open(path, "wb") as fh:
        pickle.dump(snapshot, fh)
    timeline = memory_timeline.build(snapshot, score_elements(workload))
    figures = timeline.as_dict()
    figures["max_memory_allocated_mib"] = peak / 1024**2
    return path, figures, timeline


def _recorded(step: Callable[[dict], None], tensors: dict) -> tuple[dict, int]:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(
        "all", context="all", stacks="python", max_entries=MAX_ENTRIES, clear_history=True
    )
    try:
        step(tensors)
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(None)
    return snapshot, torch.cuda.max_memory_allocated()


def _annotate(snapshot: dict[str, Any]) -> None:
    """Each of this project's frames gets its line of code (`code`), read here where the files
    are: the timeline names scores and probabilities by it. memory_viz ignores the key."""
    for trace in snapshot.get("device_traces", []):
        for event in trace:
            for frame in event.get("frames") or []:
                if memory_timeline.own_frame(frame):
                    line = linecache.getline(frame.get("filename", ""), frame.get("line", 0))
                    frame["code"] = line.strip()


def score_elements(workload: Workload) -> int:
    """Elements of one B·H·Sq·Sk score matrix: the size that names scores and probabilities."""
    return workload.batch * workload.heads * workload.queries * workload.seq_len


def load(path: str | Path) -> dict[str, Any]:
    """A snapshot this app wrote (never an upload: a pickle runs code when loaded)."""
    with open(path, "rb") as fh:
        return pickle.load(fh)  # our own run's file, never an upload
