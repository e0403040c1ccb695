"""Memory in use over one measured step, from the CUDA allocator's recorded history (issue 23),
each allocation named by what it is.

Input: the dict `torch.cuda.memory._snapshot()` returns after `_record_memory_history`
(profiling/run/memory_record.py records it around one step; tests/fixtures holds two from the
H200). Torch-free, so the views and the CPU tests build it from a plain dict.

In use means what `torch.cuda.memory_allocated` counts: an allocation from its `alloc` event to
its `free_requested` (the allocator's stats drop there; `free_completed` only says when another
stream's use ended). Blocks alive when recording began are found from the snapshot's segments
(alive at the end) and from frees without an alloc, so the curve starts at the real baseline
and its peak is comparable with `torch.cuda.max_memory_allocated`.

What an allocation is, decided from its stack and its life (the rules, in order):
- made before the step: **before the step** (inputs, the previous step's outputs and grads);
- made on autograd's thread (no Python frames) or under `backward()`: a backward allocation,
  **gradients** if alive at the end of the step, else **backward temporaries**;
- a forward allocation alive at the end: **output**; freed after the backward began: **saved for
  backward** (what autograd kept); freed within the forward: **probabilities** or **scores** when
  it holds B·H·Sq·Sk elements (softmax in its line of code: probabilities), else **workspace**
  (a kernel's scratch, a mask, a copy).
"""

from __future__ import annotations

import linecache
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BEFORE, SAVED, SCORES, PROBS = "before the step", "saved for backward", "scores", "probabilities"
WORKSPACE, OUTPUT = "workspace", "output"
BACKWARD_TEMP, GRADIENTS = "backward temporaries", "gradients"
CATEGORIES = (BEFORE, SAVED, SCORES, PROBS, WORKSPACE, OUTPUT, BACKWARD_TEMP, GRADIENTS)
ROUND = 512  # the caching allocator rounds every block up to a multiple of 512 bytes
REPO = Path(__file__).resolve().parent.parent
OWN_FOLDERS = ("attention/", "profiling/", "benchmarks/", "tests/")


@dataclass
class Block:
    size: int
    start: int | None  # event index of its alloc; None: made before recording began
    end: int | None  # event index of its free_requested; None: still alive at the end
    frames: list[dict[str, Any]] = field(default_factory=list)
    category: str = BEFORE
    made_by: str = ""


@dataclass
class Timeline:
    """In-use bytes per category at each event (x: ms since the first event, or its index)."""

    x: list[float]
    x_label: str
    series: dict[str, list[int]]  # category → bytes in use after each event
    peak_index: int
    peak_bytes: int
    baseline_bytes: int
    breakdown: list[dict[str, Any]]  # per category at the peak (see `breakdown_rows`)
    events: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "peak_mib": self.peak_bytes / 1024**2,
            "baseline_mib": self.baseline_bytes / 1024**2,
            "peak_at": self.x[self.peak_index] if self.x else None,
            "x_label": self.x_label,
            "events": self.events,
            "breakdown": self.breakdown,
        }


def build(snapshot: dict[str, Any], score_elements: int | None = None, device: int = 0) -> Timeline:
    """The timeline of the snapshot's recorded history on `device`."""
    events = [
        e
        for e in (snapshot.get("device_traces") or [[]])[device]
        if e.get("action") in ("alloc", "free_requested")
    ]
    blocks = _blocks(events, _alive_at_end(snapshot, device))
    _classify(blocks, score_elements)
    return _series(blocks, events)


def _alive_at_end(snapshot: dict[str, Any], device: int) -> dict[int, dict[str, Any]]:
    """addr → block of every allocation alive when the snapshot was taken."""
    alive = {}
    for segment in snapshot.get("segments", []):
        if segment.get("device", device) != device:
            continue
        for block in segment.get("blocks", []):
            if block.get("state") == "active_allocated":
                alive[block["address"]] = block
    return alive


def _blocks(events: list[dict], alive: dict[int, dict]) -> list[Block]:
    """Every allocation the step saw, with its life in event indices."""
    blocks: list[Block] = []
    open_blocks: dict[int, Block] = {}
    for index, event in enumerate(events):
        addr = event["addr"]
        if event["action"] == "alloc":
            block = Block(event["size"], index, None, event.get("frames") or [])
            open_blocks[addr] = block
            blocks.append(block)
        elif addr in open_blocks:
            open_blocks.pop(addr).end = index
        else:  # made before recording began, freed during it
            blocks.append(Block(event["size"], None, index))
    for addr, block in alive.items():
        if addr not in open_blocks:  # alive throughout
            blocks.append(Block(block["size"], None, None))
    return blocks


def _classify(blocks: list[Block], score_elements: int | None) -> int | None:
    """Each block's category and maker (module docstring's rules); the backward's first event."""
    made = [b for b in blocks if b.start is not None]
    backward = [b.start for b in made if _in_backward(b.frames)]
    boundary = min(backward) if backward else None
    score_sizes = _score_sizes(score_elements)
    for block in blocks:
        block.made_by = _maker(block.frames) if block.start is not None else ""
        if block.start is None:
            block.category = BEFORE
        elif boundary is not None and block.start >= boundary and _in_backward(block.frames):
            block.category = GRADIENTS if block.end is None else BACKWARD_TEMP
        elif block.end is None:
            block.category = OUTPUT
        elif boundary is not None and block.end > boundary:
            block.category = SAVED
        elif block.size in score_sizes:
            block.category = PROBS if "softmax" in _code(block.frames).lower() else SCORES
        else:
            block.category = WORKSPACE
    return boundary


def _score_sizes(elements: int | None) -> set[int]:
    """Block sizes of a B·H·Sq·Sk tensor in 2- or 4-byte elements, as the allocator rounds."""
    if not elements:
        return set()
    return {-(-elements * width // ROUND) * ROUND for width in (2, 4)}


def _in_backward(frames: list[dict]) -> bool:
    """Made by autograd: on its own thread (no Python frames) or under a backward() call."""
    if not frames:
        return True
    return any(
        f.get("name") in ("backward", "_engine_run_backward")
        and ("torch/autograd" in f.get("filename", "") or "torch/_tensor" in f.get("filename", ""))
        for f in frames
    )


def own_frame(frame: dict) -> bool:
    return _own(frame) is not None


def _own(frame: dict) -> str | None:
    """`attention/naive.py:31` for a frame in this project's code, else None."""
    filename = frame.get("filename", "").replace("\\", "/")
    for folder in OWN_FOLDERS:
        at = filename.rfind("/" + folder)
        if at >= 0 or filename.startswith(folder):
            return f"{filename[at + 1 if at >= 0 else 0 :]}:{frame.get('line', 0)}"
    return None


def _maker(frames: list[dict]) -> str:
    """The innermost frame in this project's code, with its function (frames: innermost first)."""
    if not frames:
        return "autograd (its own thread)"
    for frame in frames:
        where = _own(frame)
        if where:
            return f"{where} {frame.get('name', '')}".strip()
    first = frames[0]
    return f"{Path(first.get('filename', '?')).name}:{first.get('line', 0)} {first.get('name', '')}"


def _code(frames: list[dict]) -> str:
    """The source line of the innermost own frame, read from this checkout (empty if absent)."""
    for frame in frames:
        where = _own(frame)
        if where:
            if "code" in frame:  # written by memory_record at the run
                return str(frame["code"])
            path, line = where.rsplit(":", 1)
            return linecache.getline(str(REPO / path), int(line))
    return ""


def _series(blocks: list[Block], events: list[dict]) -> Timeline:
    """Bytes in use per category after each event, its peak and the breakdown there."""
    baseline = sum(b.size for b in blocks if b.start is None)
    current = Counter({BEFORE: baseline})
    starts: dict[int, Block] = {b.start: b for b in blocks if b.start is not None}
    ends: dict[int, Block] = {b.end: b for b in blocks if b.end is not None}
    series: dict[str, list[int]] = {name: [] for name in CATEGORIES}
    totals = []
    for index in range(len(events)):
        if index in starts:
            current[starts[index].category] += starts[index].size
        if index in ends:
            current[ends[index].category] -= ends[index].size
        for name in CATEGORIES:
            series[name].append(current[name])
        totals.append(sum(current.values()))
    peak_index = max(range(len(totals)), key=totals.__getitem__) if totals else 0
    peak = totals[peak_index] if totals else baseline
    x, label = _x_axis(events)
    return Timeline(
        x=x,
        x_label=label,
        series={name: values for name, values in series.items() if any(values)},
        peak_index=peak_index,
        peak_bytes=peak,
        baseline_bytes=baseline,
        breakdown=breakdown_rows(blocks, peak_index if totals else None),
        events=len(events),
    )


def _x_axis(events: list[dict]) -> tuple[list[float], str]:
    times = [e.get("time_us") for e in events]
    if events and all(isinstance(t, int | float) for t in times):
        first = times[0]
        return [(t - first) / 1000 for t in times], "ms since the step's first allocation"
    return [float(i) for i in range(len(events))], "allocator event"


def _alive_at(block: Block, index: int | None) -> bool:
    if index is None:
        return block.start is None and block.end is None
    started = block.start is None or block.start <= index
    return started and (block.end is None or block.end > index)


def breakdown_rows(blocks: list[Block], peak_index: int | None) -> list[dict[str, Any]]:
    """Per category: MiB and blocks in use at the peak, MiB allocated during the step, and
    the code that made the most of it."""
    rows = []
    for name in CATEGORIES:
        mine = [b for b in blocks if b.category == name]
        if not mine:
            continue
        at_peak = [b for b in mine if _alive_at(b, peak_index)]
        makers: Counter[str] = Counter()
        for block in at_peak or mine:
            makers[block.made_by or "before recording"] += block.size
        rows.append(
            {
                "what": name,
                "MiB at peak": sum(b.size for b in at_peak) / 1024**2,
                "blocks at peak": len(at_peak),
                "MiB allocated in the step": sum(b.size for b in mine if b.start is not None)
                / 1024**2,
                "made by": "; ".join(who for who, _ in makers.most_common(2)),
            }
        )
    return rows
