"""One measured step of a model run, per mode, inside its `model_step` span.

prefill: one forward over the padded batch (no cache). decode: `new_tokens` forwards of one
token each against the KV cache a prefill left (the prefill and the cache's copy for each step
happen before the span: only the decode is measured). train: a forward with the loss over real
tokens, and its backward.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.autograd.profiler import record_function

from profiling.run.model.build import Batch, next_tokens
from profiling.vocabulary import MODEL_STEP
from profiling.workload.model.spec import ModelWorkload

IGNORED = -100  # transformers' label for "no loss here" (pads)


def prefill_logits(model, inputs: Batch) -> torch.Tensor:
    with torch.no_grad():
        return model(
            input_ids=inputs.input_ids, attention_mask=inputs.attention_mask,
            position_ids=inputs.position_ids, use_cache=False,
        ).logits  # fmt: skip


def real_logits(model, inputs: Batch) -> torch.Tensor:
    """`prefill_logits(model, inputs)[inputs.real]` without computing the pads: each sequence
    runs the decoder on its real tokens alone (the same function: the pads are masked out of
    every real token's attention, and their positions are not counted), then the LM head and
    Gemma-2's final soft-capping on the real tokens' final hidden states, in the order
    transformers' ForCausalLM.forward applies them. A ragged batch's pads are many (41 % of
    issue 43's), and the LM head is most of a short model's FLOPs."""
    with torch.no_grad():
        if bool(inputs.real.all()):  # no pads: the batch in one forward
            return prefill_logits(model, inputs).flatten(0, 1)
        rows = []
        for row in range(inputs.input_ids.shape[0]):
            real = inputs.real[row]
            rows.append(
                model.model(
                    input_ids=inputs.input_ids[row, real][None],
                    attention_mask=inputs.attention_mask[row, real][None],
                    position_ids=inputs.position_ids[row, real][None], use_cache=False,
                ).last_hidden_state[0]
            )  # fmt: skip
        logits = model.lm_head(torch.cat(rows))
        cap = getattr(model.config, "final_logit_softcapping", None)
        if cap is not None:
            logits = logits / cap
            logits = torch.tanh(logits)
            logits = logits * cap
        return logits


def nothing() -> None:
    return None


@dataclass
class Step:
    """The measured step (`run`, inside its span) and what each needs first, outside the span
    and outside any timing (`prepare`: a decode's fresh copy of the prompt's cache). A prefill's
    `run` returns its logits (the runner checks the last timed step's against the reference
    instead of running the forward once more); decode's and train's return None."""

    run: Callable[[], Any]
    prepare: Callable[[], None] = field(default=nothing)

    def __call__(self) -> None:
        self.prepare()
        self.run()


def make_step(workload: ModelWorkload, model, inputs: Batch, device: str) -> Step:
    """The measured step of the workload's mode."""
    if workload.mode == "prefill":

        def prefill() -> torch.Tensor:
            with record_function(MODEL_STEP):
                return prefill_logits(model, inputs)

        return Step(prefill)
    if workload.mode == "decode":
        return _decode_step(workload, model, inputs, device)
    return _train_step(model, inputs)


def _decode_step(workload, model, inputs: Batch, device: str) -> Step:
    with torch.no_grad():
        prompt = model(
            input_ids=inputs.input_ids, attention_mask=inputs.attention_mask,
            position_ids=inputs.position_ids, use_cache=True,
        )  # fmt: skip
    cache, tokens = prompt.past_key_values, next_tokens(workload, device)
    last = inputs.position_ids[:, -1:]
    del prompt
    fresh: list = []

    def prepare() -> None:
        fresh[:] = [copy.deepcopy(cache)]  # each step decodes from the prompt's cache

    def decode() -> None:
        own = fresh.pop() if fresh else copy.deepcopy(cache)
        mask = inputs.attention_mask
        with torch.no_grad(), record_function(MODEL_STEP):
            for step in range(workload.new_tokens):
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
                model(
                    input_ids=tokens[step], attention_mask=mask, position_ids=last + 1 + step,
                    past_key_values=own, use_cache=True,
                )  # fmt: skip

    return Step(decode, prepare)


def _train_step(model, inputs: Batch) -> Step:
    labels = inputs.input_ids.masked_fill(~inputs.real, IGNORED)

    def train() -> None:
        with record_function(MODEL_STEP):
            loss = model(
                input_ids=inputs.input_ids, attention_mask=inputs.attention_mask,
                position_ids=inputs.position_ids, labels=labels, use_cache=False,
            ).loss  # fmt: skip
            loss.backward()

    return Step(train, lambda: model.zero_grad(set_to_none=True))
