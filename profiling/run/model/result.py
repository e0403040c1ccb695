"""A model run's result: plain, picklable data (no tensors), one row per implementation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiling.analysis.model.padding import PadFigures
from profiling.analysis.model.step import StepSplit
from profiling.gantt.spec import FigureSpec


@dataclass
class SdpaAccount:
    """SDPA's own account of the real call inside the model (layer 0's first call)."""

    call: str  # the call as torch saw it: shapes, dtype, mask, is_causal, enable_gqa
    chosen: str  # the backend its dispatcher takes under the implementation's pin
    checks: list[tuple[str, bool, tuple[str, ...]]]  # (backend, accepts, torch's reasons)


@dataclass
class ImplementationRun:
    """One implementation on the model: what ran and what it cost, or why it did not run."""

    id: str
    refused: str = ""  # a known rule: cannot run here (and why)
    failed: str = ""  # it started and broke
    ran: str = ""  # what transformers ran (the Hub kernel or its fallback, say)
    note: str = ""
    split: StepSplit | None = None
    backend: str | None = None  # the SDPA backend the trace shows ran (aten op)
    sdpa: SdpaAccount | None = None
    attention_kernels: list[tuple[str, float]] = field(default_factory=list)  # name, µs/step
    timed_ms: float | None = None  # the step, timed apart (CUDA events / perf_counter)
    logits_error: float | None = None  # max |Δ| / max |eager float32| on real tokens
    pad: PadFigures | None = None
    tokens_per_s: float | None = None  # decode: new tokens / s over the batch
    trace: str = ""  # the Chrome trace's path
    gantt: FigureSpec | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not (self.refused or self.failed)


@dataclass
class ModelRun:
    """A model workload over its implementations."""

    workload: dict[str, Any]
    text: str
    device: str
    build_s: float
    runs: list[ImplementationRun]
    notes: list[str] = field(default_factory=list)
    # what the run store keeps of the machine (issue 43: model runs are kept like the others)
    device_name: str = ""
    versions: dict[str, str | None] = field(default_factory=dict)  # torch, transformers
    machine: dict[str, Any] = field(default_factory=dict)  # profiling.run.result.machine's
    out_dir: str = ""  # the folder of each implementation's trace (.json.gz)
