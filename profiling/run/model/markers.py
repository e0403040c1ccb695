"""The spans a model run writes into its trace, and SDPA's actual call caught inside the model.

`marked(model)` puts a `model_layer_<i>` span around each decoder layer and a `model_norm` span
around each norm (module hooks), and a `model_attention` span around each call of the attention
function transformers picks (for the run, its entry in transformers' AttentionInterface is
wrapped; the wrapper is removed on exit). The names are profiling.vocabulary's: the analyses
read them back (profiling/analysis/model/step.py).

`sdpa_calls()` records the arguments of the first `torch.nn.functional.scaled_dot_product_attention`
call transformers' SDPA path makes inside (it looks the function up at each call), so torch's
reasons are asked of the real call: its mask, its GQA flag, its dtype.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import torch
from torch.autograd.profiler import record_function
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from attention.sdpa_reasons import SdpaCall
from profiling.vocabulary import MODEL_ATTENTION, MODEL_LAYER, MODEL_NORM


def decoder_layers(model) -> list[torch.nn.Module]:
    return list(model.model.layers)


@contextlib.contextmanager
def marked(model) -> Iterator[None]:
    """The layers', norms' and attention calls' spans, for as long as the block lasts."""
    handles = []
    for index, layer in enumerate(decoder_layers(model)):
        handles += _span_hooks(layer, f"{MODEL_LAYER}{index}")
    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm"):
            handles += _span_hooks(module, MODEL_NORM)
    key = model.config._attn_implementation
    had_local = key in ALL_ATTENTION_FUNCTIONS._local_mapping
    original = ALL_ATTENTION_FUNCTIONS.get_interface(key, _eager_function(model))

    def attention(*args, **kwargs):
        with record_function(MODEL_ATTENTION):
            return original(*args, **kwargs)

    ALL_ATTENTION_FUNCTIONS[key] = attention
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        if had_local:
            ALL_ATTENTION_FUNCTIONS[key] = original
        else:
            del ALL_ATTENTION_FUNCTIONS[key]


def _eager_function(model):
    """The model's own eager attention (each model module defines one: Gemma-2's soft-caps)."""
    module = sys.modules[type(decoder_layers(model)[0].self_attn).__module__]
    return module.eager_attention_forward


def _span_hooks(module: torch.nn.Module, name: str) -> list:
    """A record_function span from the module's forward pre-hook to its forward hook."""
    open_spans: list[record_function] = []

    def enter(*_args):
        span = record_function(name)
        span.__enter__()
        open_spans.append(span)

    def leave(*_args):
        if open_spans:
            open_spans.pop().__exit__(None, None, None)

    return [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]


@contextlib.contextmanager
def sdpa_calls() -> Iterator[list[SdpaCall]]:
    """The first SDPA call made inside (layer 0's), as an SdpaCall in a list (tensors detached,
    kept until the caller lets the list go; empty when SDPA was not called)."""
    calls: list[SdpaCall] = []
    functional = torch.nn.functional
    real = functional.scaled_dot_product_attention

    def recording(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        if calls:  # the first call only: a decode's later ones would hold every cache's K/V
            return real(query, key, value, attn_mask, dropout_p, is_causal, **kwargs)
        calls.append(
            SdpaCall(
                query.detach(), key.detach(), value.detach(),
                None if attn_mask is None else attn_mask.detach(),
                bool(is_causal), bool(kwargs.get("enable_gqa", False)),
            )
        )  # fmt: skip
        return real(query, key, value, attn_mask, dropout_p, is_causal, **kwargs)

    functional.scaled_dot_product_attention = recording
    try:
        yield calls
    finally:
        functional.scaled_dot_product_attention = real
