"""What a variant is: an attention implementation that describes itself.

A variant knows how to build its forward for a `Problem` (attention's own description of the
input: shape, dtype, device; nothing here knows about profiling), which machines it runs on
and why not elsewhere, what its first run costs, how the page learns what really ran, and how
much memory it holds. Each variant lives in its own module and is listed once in
attention/registry.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

Layout = Literal["bhsd", "bshd"]  # [batch, heads, seq, dim] (SDPA) or [batch, seq, heads, dim]
Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# Why a variant cannot run on a device with a dtype (None: it can). Pickers ask before any
# shape is chosen, so a rule that needs the shape (a head dim) is the build's: it raises
# VariantUnavailable.
Rule = Callable[[str, torch.dtype], "str | None"]
FirstRun = Literal["", "compiles", "downloads"]
CompareDefault = Literal["no", "always", "where it runs"]


class VariantUnavailable(RuntimeError):
    """The variant cannot run on this machine or for this input, by a known rule; the message
    says which. Anything else that stops a variant is a failure, not this."""


@dataclass(frozen=True)
class Problem:
    """The input a variant is built for (profiling builds it from a Workload)."""

    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool
    dtype: torch.dtype
    device: str
    # Inference shapes (None: as today). seq_len is the keys' length (a decode's KV cache);
    # q_len the queries' (bottom-right aligned: attention/masks.py); kv_heads divides heads.
    q_len: int | None = None
    kv_heads: int | None = None
    window: int | None = None  # a sliding window: each query sees the last `window` keys

    @property
    def queries(self) -> int:
        return self.q_len or self.seq_len

    @property
    def key_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def group(self) -> int:
        """Query heads per K/V head: 1 is multi-head, `heads` is multi-query attention."""
        return self.heads // self.key_heads

    @property
    def square(self) -> bool:
        """As every run before issue 21: queries = keys, one K/V head per query head, no
        window; a variant's original code path."""
        return self.queries == self.seq_len and self.group == 1 and self.window is None


@dataclass(frozen=True)
class Built:
    forward: Forward
    ran: str  # what will actually run, e.g. "eager" or "Hub kernels-community/flash-attn2 v3"
    note: str = ""
    # A library that picks its kernel at call time says, for the run's q, k, v, which of its
    # backends accept them, why the others refuse and which it picks (SDPA: sdpa_reasons.py)
    explain: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], dict] | None = None


def runs_anywhere(device: str, dtype: torch.dtype) -> str | None:
    return None


def never_declines(exc: Exception) -> bool:
    return False


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One attention implementation, described by itself; keyword arguments only."""

    id: str
    label: str
    lesson: str  # what the trace teaches, one line
    layout: Layout
    build: Callable[[Problem], Built]  # raises VariantUnavailable where a known rule refuses
    unavailable: Rule = runs_anywhere
    # Why its backward cannot run there (None: it can), for runs that train.
    backward_unavailable: Rule = runs_anywhere
    # Entered around warm-up and the profiled steps alike (SDPA's backend pin), not per call.
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    warmup_calls: int = 3
    # Before its first run it compiles or downloads: slow, so the GPU slot is sized for it.
    first_run: FirstRun = ""
    # What `ran` says: the build's own words, or (when set) read from the backend the trace
    # shows, for a library that picks its kernel at call time.
    ran_from_trace: Callable[[str | None], str] | None = None
    # The memory model (the runner's estimate): B·H·S² matrices alive at peak, and whether
    # they are held in FP32 whatever the input dtype.
    score_matrices: int = 0
    upcasts: bool = False
    # B·H·S² matrices alive at the backward's peak (those saved for it and its own), for runs
    # that train.
    backward_matrices: int = 0
    # Added to the lesson with the causal mask off, when the mask was the lesson.
    lesson_without_mask: str = ""
    # What its backward teaches (shown for backward and train runs), one line.
    backward_lesson: str = ""
    # In Compare's default list: always (the post's six, listed with the reason when they
    # cannot run), where it runs (the Hub builds), or only when asked for.
    compare_default: CompareDefault = "no"
    # Whether an error raised at call time is the library refusing this input by its own rule
    # (the variant cannot run it), rather than a failure.
    declines: Callable[[Exception], bool] = never_declines

    @property
    def slow_first_run(self) -> bool:
        return bool(self.first_run)

    def ran(self, built: Built, backend: str | None) -> str:
        """What ran, for the summary: `backend` is the one the trace shows (None: none seen)."""
        return self.ran_from_trace(backend) if self.ran_from_trace else built.ran
