"""A measured step with a backward: what one step of a `backward` or `train` run does, and the
bytes its forward keeps for the backward.

A training step is the forward, then `out.backward(grad_out)`. `train` measures both (the
step's `attn_step` span holds an `attn_fwd` and an `attn_bwd`); `backward` measures only the
backward: its forward runs in the step, outside any phase span. Autograd launches the
backward's kernels from its own thread, which is why an `attn_bwd` window holds every thread's
work (profiling.vocabulary.ALL_THREADS).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.profiler import record_function

from attention import Forward, VariantUnavailable
from profiling.vocabulary import BACKWARD, FORWARD, STEP
from profiling.workload import Workload

INPUTS = ("q", "k", "v")
GRADIENTS = {"q": "dq", "k": "dk", "v": "dv"}


def measured_step(workload: Workload, forward: Forward) -> Callable[[dict], None]:
    """One measured step on the run's tensors, its spans named as the trace readers expect;
    the step's output (and, with a backward, the inputs' gradients) are left in them for the
    reference check. The tensors are an argument, not captured: a failed step's traceback
    keeps this function, and must not keep the inputs alive through it."""
    if not workload.needs_grad:

        def forward_step(tensors: dict) -> None:
            with record_function(FORWARD):
                tensors["out"] = forward(*(tensors[name] for name in INPUTS))

        return forward_step
    train = workload.mode == "train"

    def training_step(tensors: dict) -> None:
        for name in INPUTS:  # a fresh step: zero_grad(set_to_none=True)
            tensors[name].grad = None
        with record_function(STEP) if train else contextlib.nullcontext():
            with record_function(FORWARD) if train else contextlib.nullcontext():
                out = forward(*(tensors[name] for name in INPUTS))
            if not out.requires_grad:
                raise VariantUnavailable(
                    f"{workload.variant}'s forward returned an output without a gradient: "
                    "what it ran has no backward"
                )
            with record_function(BACKWARD):
                out.backward(tensors["grad_out"])
        tensors["out"] = out.detach()
        for name, gradient in GRADIENTS.items():
            tensors[gradient] = tensors[name].grad

    return training_step


def grad_mode(workload: Workload) -> contextlib.AbstractContextManager:
    """No autograd graph for a forward run (today's behaviour); one for a run with a backward."""
    return torch.enable_grad() if workload.needs_grad else torch.no_grad()


@dataclass(frozen=True)
class SavedTensor:
    """One tensor autograd kept for the backward, named by what it is."""

    what: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int


def saved_for_backward(workload: Workload, forward: Forward, tensors: dict) -> list[SavedTensor]:
    """Every distinct tensor one forward saves for its backward (torch's saved-tensor hooks),
    largest first. A tensor saved twice, or as a view of another, is counted once."""
    seen: dict[tuple[int, int], SavedTensor] = {}
    inputs = {_storage_key(tensors[name]): name for name in INPUTS}

    def pack(tensor: torch.Tensor) -> tuple[int, int]:
        # Only the storage's key is kept, never the tensor: a saved output returned as itself
        # would hold its own grad_fn in a cycle Python's collector cannot see (the inputs and
        # the graph would leak run after run). This graph never runs backward.
        key = _storage_key(tensor)
        if key not in seen:
            size = tensor.untyped_storage().nbytes()
            what = inputs.get(key) or _what(tuple(tensor.shape), tensor.dtype, workload)
            seen[key] = SavedTensor(what, tuple(tensor.shape), _dtype(tensor.dtype), size)
        return key

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, _no_backward):
        out = forward(*(tensors[name] for name in INPUTS))
        output_key = _storage_key(out)
        del out  # the graph and what it saved go with it
    rows = [
        SavedTensor("output", row.shape, row.dtype, row.bytes) if key == output_key else row
        for key, row in seen.items()
    ]
    return sorted(rows, key=lambda row: -row.bytes)


def _no_backward(key: tuple[int, int]) -> torch.Tensor:
    raise RuntimeError("the graph saved_for_backward builds is measured, never differentiated")


def kept_beyond_inputs(rows: list[SavedTensor]) -> int:
    """Bytes saved for backward that are neither an input nor the output: what training holds
    because of how the attention is computed."""
    return sum(row.bytes for row in rows if row.what not in (*INPUTS, "output"))


def _storage_key(tensor: torch.Tensor) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def _what(shape: tuple[int, ...], dtype: torch.dtype, workload: Workload) -> str:
    """A saved tensor named by its size: S² per (batch, head) is the attention matrix."""
    batch, heads, seq_len = workload.batch, workload.heads, workload.seq_len
    count = 1
    for size in shape:
        count *= size
    if count == batch * heads * seq_len * seq_len:
        return "B·H·S² attention matrix (scores or probabilities)"
    if count == seq_len * seq_len:
        return "S² mask" if dtype == torch.bool else "S² matrix"
    if count == batch * heads * seq_len * workload.head_dim:
        return "B·H·S·D copy of an input (e.g. q scaled)"
    if count == batch * heads * seq_len:
        return "B·H·S row statistics (log-sum-exp)"
    if count <= 16:
        return "scalars (e.g. a random seed and offset)"
    return "other"


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
