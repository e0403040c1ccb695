"""A model step's time, split: attention kernels, GEMMs, norms, rotary and other elementwise
work, copies, and the gaps where the GPU idled; attention's share of each decoder layer.

On a GPU the step is the span from its first kernel's start to its last's end (the work the
`model_step` span launched); each kernel's time is counted once even where kernels overlap
(first come, first counted), and what is left is idle: the categories add up to the step. On a
CPU the step is the `model_step` span itself, split by each operator's self time (an aten
op's own work; the markers' and Python's own time is "framework"): again they add up.

A kernel is attention when its launch is inside a `model_attention` span (the attention
function transformers calls, whatever it runs: eager's matmuls and softmax, SDPA, flex, a
FlashAttention), a norm inside a `model_norm` span; otherwise its name decides.

`step_times` gives each step's figures apart: its span, and the GPU's busy time (the union of
its work). A host-bound step (a decode's tiny kernels waiting for their launches) is mostly
idle gaps, and the profiler's cost per operator on the CPU widens those gaps, not the kernels:
the busy time is the step's GPU work, the span is not (docs/results-model.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiling.analysis.launch import merge_intervals
from profiling.analysis.summary import forward_work, starts_inside
from profiling.trace.model import Trace
from profiling.trace.query import is_in
from profiling.vocabulary import MODEL_ATTENTION, MODEL_LAYER, MODEL_NORM, MODEL_STEP

ATTENTION, GEMM, NORMS, ELEMENTWISE, COPIES, IDLE, FRAMEWORK = (
    "attention", "GEMMs (projections, MLP, LM head)", "norms", "rotary and other elementwise",
    "copies", "idle gaps", "framework (Python, markers)",
)  # fmt: skip
CATEGORIES = (ATTENTION, GEMM, NORMS, ELEMENTWISE, COPIES, IDLE, FRAMEWORK)
GEMM_NAME = re.compile(
    r"gemm|gemv|nvjet|cutlass|xmma|splitk|cublas|aten::(mm|addmm|bmm|matmul|linear|baddbmm)$",
    re.IGNORECASE,
)
COPY_NAME = re.compile(r"copy|memcpy|memset|aten::(cat|clone|contiguous|to|_to_copy|fill_)$", re.I)


@dataclass
class StepSplit:
    """µs per measured step by category, the step's own µs, and per decoder layer
    (index, µs, attention µs)."""

    step_us: float
    categories: dict[str, float]
    layers: list[tuple[int, float, float]] = field(default_factory=list)
    on_gpu: bool = True
    steps: int = 1
    # the attention category's kernels (ops on a CPU): (name, µs per step), largest first
    attention_kernels: list[tuple[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # plain floats: numpy's round() of 3894.05 gives 3894.0, Python's 3894.1, so a view
        # of numpy figures would change once read back from the store's JSON
        self.step_us = float(self.step_us)
        self.categories = {name: float(us) for name, us in self.categories.items()}
        self.layers = [(int(i), float(total), float(att)) for i, total, att in self.layers]
        self.attention_kernels = [(str(name), float(us)) for name, us in self.attention_kernels]

    @property
    def attention_share(self) -> float:
        return self.categories.get(ATTENTION, 0.0) / self.step_us if self.step_us else 0.0


def category(name: str, in_attention: bool, in_norm: bool) -> str:
    """One kernel's (or CPU op's) category: the marker it was launched in, else its name."""
    if in_attention:
        return ATTENTION
    if in_norm:
        return NORMS
    if GEMM_NAME.search(name):
        return GEMM
    if COPY_NAME.search(name):
        return COPIES
    return ELEMENTWISE


def _marked(spans: pd.DataFrame, rows: np.ndarray, name: str) -> np.ndarray:
    """For each of `rows` (CPU spans), whether it starts inside a span named `name`."""
    windows = np.flatnonzero(is_in(spans["kind"], "cpu") & is_in(spans["name"], name))
    if not len(windows) or not len(rows):
        return np.zeros(len(rows), dtype=bool)
    return starts_inside(spans, rows, windows)


def _own_time(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's time not already covered by an earlier-starting one (sorted input)."""
    covered = np.maximum.accumulate(np.concatenate([[-np.inf], end[:-1]]))
    return np.clip(end - np.maximum(start, covered), 0.0, None)


def split_step(trace: Trace) -> StepSplit:
    """The measured steps' time by category, per step (module docstring)."""
    windows, work = forward_work(trace, MODEL_STEP)
    if not len(windows):
        raise ValueError(f"the trace has no {MODEL_STEP} span: not a model run's trace")
    if len(work):
        return _gpu_split(trace, windows, work)
    return _cpu_split(trace, windows)


def _gpu_split(trace: Trace, windows: pd.DataFrame, work: pd.DataFrame) -> StepSplit:
    spans = trace.spans
    work = work.sort_values("start_us", kind="stable")
    launches = work["link"].to_numpy()
    in_attention = _marked(spans, launches, MODEL_ATTENTION)
    in_norm = _marked(spans, launches, MODEL_NORM)
    names = work["name"].astype(str).to_numpy()
    kinds = work["category"].astype(str).to_numpy()
    own = _own_time(work["start_us"].to_numpy(), work["end_us"].to_numpy())
    steps = len(windows)
    totals = dict.fromkeys(CATEGORIES[:-1], 0.0)
    attention: dict[str, float] = {}
    for name, kind, a, n, us in zip(names, kinds, in_attention, in_norm, own, strict=True):
        label = COPIES if kind in ("memcpy", "memset") else category(name, a, n)
        totals[label] += us
        if label == ATTENTION:
            attention[name] = attention.get(name, 0.0) + us / steps
    busy_span = _busy_span(work, spans, windows)
    totals[IDLE] = max(busy_span - sum(totals.values()), 0.0)
    per_step = {key: value / steps for key, value in totals.items()}
    layers = _layers(spans, launches, own, in_attention, steps)
    return StepSplit(busy_span / steps, per_step, layers, True, steps, _largest(attention))


def _largest(times: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(times.items(), key=lambda item: -item[1])


def _busy_span(work: pd.DataFrame, spans: pd.DataFrame, windows: pd.DataFrame) -> float:
    """Each step's first kernel start to last kernel end, summed over the steps."""
    return float(_window_times(work, spans, windows)["span_us"].sum())


STEP_TIME_COLUMNS = ("step_us", "span_us", "busy_us", "work_sum_us", "work_items")


def step_times(trace: Trace) -> pd.DataFrame:
    """One row per `model_step` span, in trace order: the span's own (CPU) µs; of the GPU work
    it launched, the span (first start to last end), the busy µs (the union of the work's
    intervals, every stream of the one device merged: overlap counted once, gaps left out),
    the sum of the items' durations, and their count. A CPU run's GPU columns are 0."""
    windows, work = forward_work(trace, MODEL_STEP)
    if not len(windows):
        raise ValueError(f"the trace has no {MODEL_STEP} span: not a model run's trace")
    return _window_times(work, trace.spans, windows)


def _window_times(work: pd.DataFrame, spans: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """step_times' rows: each work item belongs to the window its launch started in (ends
    included), the latest-starting one where windows overlap."""
    order = np.argsort(windows["start_us"].to_numpy(float), kind="stable")
    w_start = windows["start_us"].to_numpy(float)[order]
    w_end = windows["end_us"].to_numpy(float)[order]
    links = work["link"].to_numpy(dtype=np.int64)
    launched = spans["start_us"].to_numpy(float)[links]
    slot = np.searchsorted(w_start, launched, side="right") - 1
    ok = slot >= 0
    ok[ok] = launched[ok] <= w_end[slot[ok]]
    start, end = work["start_us"].to_numpy(float), work["end_us"].to_numpy(float)
    rows = []
    for index in range(len(order)):
        mine = np.flatnonzero(ok & (slot == index))
        s, e = start[mine], end[mine]
        ms, me, _ = merge_intervals(s, e)
        span = float(e.max() - s.min()) if len(mine) else 0.0
        busy = float((me - ms).sum())
        rows.append((w_end[index] - w_start[index], span, busy, float((e - s).sum()), len(mine)))
    return pd.DataFrame(rows, columns=list(STEP_TIME_COLUMNS))


def _layers(spans, launches, own, in_attention, steps: int) -> list[tuple[int, float, float]]:
    """Per decoder layer: its kernels' µs and attention's µs, per step."""
    names = spans["name"].astype(str)
    found = sorted({n for n in names.unique() if n.startswith(MODEL_LAYER)}, key=_layer_index)
    rows = []
    for name in found:
        inside = _marked(spans, launches, name)
        total, attention = own[inside].sum(), own[inside & in_attention].sum()
        rows.append((_layer_index(name), total / steps, attention / steps))
    return rows


def _layer_index(name: str) -> int:
    return int(name[len(MODEL_LAYER) :])


def _cpu_split(trace: Trace, windows: pd.DataFrame) -> StepSplit:
    """A CPU step: every span inside the step windows (their own threads), by self time."""
    spans = trace.spans
    cpu = np.flatnonzero(is_in(spans["kind"], "cpu"))
    inside = cpu[starts_inside(spans, cpu, windows.index.to_numpy())]
    names = spans["name"].astype(str).to_numpy()[inside]
    selfs = spans["self_us"].to_numpy()[inside]
    ops = np.char.startswith(names.astype(str), "aten::")
    in_attention = _marked(spans, inside, MODEL_ATTENTION)
    in_norm = _marked(spans, inside, MODEL_NORM)
    totals = dict.fromkeys(CATEGORIES, 0.0)
    steps = len(windows)
    attention: dict[str, float] = {}
    for name, op, a, n, us in zip(names, ops, in_attention, in_norm, selfs, strict=True):
        label = category(name, a, n) if op else FRAMEWORK
        totals[label] += us
        if label == ATTENTION:
            attention[name] = attention.get(name, 0.0) + us / steps
    step_us = float(windows["dur_us"].sum())
    layers = _layers(spans, inside, np.where(ops, selfs, 0.0), in_attention, steps)
    per_step = {key: value / steps for key, value in totals.items()}
    return StepSplit(step_us / steps, per_step, layers, False, steps, _largest(attention))
