"""A preset's model with random weights, made fast, and the batch it runs on.

The model is built on the meta device (no memory, no initialisation), moved with `to_empty` to
the target (memory, uninitialised) and filled in place by transformers' own `init_weights`
(its initializer_range for weights, ones or zeros for norms as each model wants, the rotary
frequencies recomputed): nothing is made twice, nothing is downloaded. Fixed seeds: the same
workload gets the same weights and tokens on every run.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from profiling.run.model.exact import exact_linears
from profiling.workload.model.presets import build_config
from profiling.workload.model.spec import ModelWorkload

SEED = 0


@dataclass
class Batch:
    """The token ids, the padding mask (1: real token) and the positions of a ragged batch."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor

    @property
    def real(self) -> torch.Tensor:
        return self.attention_mask.bool()


def build(workload: ModelWorkload, device: str, attn_implementation: str = "eager"):
    """(the model in eval mode, seconds its build took on `device`)."""
    config = build_config(workload.preset, workload.layers)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    began = time.perf_counter()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(
            config, attn_implementation=attn_implementation, dtype=workload.torch_dtype
        )
    model.to_empty(device=device)
    torch.manual_seed(SEED)
    if device == "cuda":
        torch.cuda.manual_seed(SEED)
    with torch.no_grad():
        model.init_weights()
    model.eval()
    sync()
    return model, time.perf_counter() - began


def float32_copy(model, exact: bool | None = None):
    """The same weights in float32, eager attention: the logits check's reference. Each weight
    is upcast straight into the copy (deepcopy is handed the float32 tensors), not copied in
    the model's dtype first; a tied weight stays one tensor. `exact` (default: on a GPU) runs
    the linear layers of a bfloat16 model as float32 products on tensor cores (exact.py)."""
    memo: dict[int, Any] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        if id(tensor) in memo or not tensor.is_floating_point():
            continue
        upcast = tensor.detach().to(torch.float32, copy=True)
        if isinstance(tensor, torch.nn.Parameter):
            upcast = torch.nn.Parameter(upcast, requires_grad=tensor.requires_grad)
        memo[id(tensor)] = upcast
    reference = copy.deepcopy(model, memo).float()
    reference.set_attn_implementation("eager")
    if exact if exact is not None else next(model.parameters()).is_cuda:
        exact_linears(reference, model)
    return reference


def batch(workload: ModelWorkload, device: str, length: int | None = None) -> Batch:
    """Fixed-seed tokens padded to `length` (default seq_len) on the workload's padding side;
    positions count real tokens only (a left-padded sequence starts at 0 where it starts)."""
    length = length or workload.seq_len
    vocab = int(workload.spec.values["vocab_size"])
    generator = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, vocab, (workload.batch, length), generator=generator)
    mask = torch.zeros(workload.batch, length, dtype=torch.long)
    for row, real in enumerate(workload.real_lengths):
        real = min(real, length)
        if workload.padding_side == "left":
            mask[row, length - real :] = 1
        else:
            mask[row, :real] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return Batch(ids.to(device), mask.to(device), positions.to(device))


def next_tokens(workload: ModelWorkload, device: str) -> torch.Tensor:
    """The decode steps' input tokens (fixed, not sampled: every implementation gets the same)."""
    vocab = int(workload.spec.values["vocab_size"])
    generator = torch.Generator().manual_seed(SEED + 1)
    shape = (workload.new_tokens, workload.batch, 1)
    return torch.randint(0, vocab, shape, generator=generator).to(device)
