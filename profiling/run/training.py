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
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.profiler import record_function

from attention import Forward, VariantUnavailable
from profiling.vocabulary import BACKWARD, FORWARD, STEP
from profiling.workload.spec import Workload

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
    """A saved tensor named by its shape: the first of `_known_shapes` whose sizes it has (in
    any layout, broadcast dimensions of 1 aside), else the first whose element count it has
    (a flattened view), else what a handful of elements or nothing known is."""
    known = _known_shapes(workload, dtype == torch.bool)
    sizes = _sizes(shape)
    for what, dims in known:
        if _sizes(dims) == sizes:
            return what
    count = math.prod(shape)
    for what, dims in known:
        if math.prod(dims) == count:
            return what
    return "scalars (e.g. a random seed and offset)" if count <= 16 else "other"


def _known_shapes(workload: Workload, is_mask: bool) -> list[tuple[str, tuple[int, ...]]]:
    """What a forward may save, by shape, most telling first. Q is the queries' length (S
    when there is no q_len), S the keys', H the query heads, KV the K/V heads."""
    b, h, kv = workload.batch, workload.heads, workload.key_heads
    q, s, d = workload.queries, workload.seq_len, workload.head_dim
    square = q == s
    pairs = "S²" if square else "Q·S"
    matrix = (f"B·H·{pairs} attention matrix (scores or probabilities)", (b, h, q, s))
    mask = (f"{pairs} mask" if is_mask else f"{pairs} matrix", (q, s))
    known = [mask, matrix] if is_mask else [matrix, mask]  # the same sizes when B = H = 1
    if kv != h:
        known.append(("B·H·S·D K or V expanded to every query head", (b, h, s, d)))
    if square and kv == h:
        known.append(("B·H·S·D copy of an input (e.g. q scaled)", (b, h, s, d)))
    else:
        known.append(("B·H·Q·D copy of q (e.g. q scaled)", (b, h, q, d)))
        known.append(("B·KV·S·D copy of k or v", (b, kv, s, d)))
    known.append((f"B·H·{'S' if square else 'Q'} row statistics (log-sum-exp)", (b, h, q)))
    return known


def _sizes(shape: tuple[int, ...]) -> list[int]:
    """A shape's sizes in order of size, without 1s: the same in (B, H, S, D) and (B, S, H, D)
    and in a mask broadcast as (1, 1, Q, S)."""
    return sorted(size for size in shape if size != 1)


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
