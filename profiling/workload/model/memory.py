"""The memory a model run needs, and its refusal before any weight is made.

An upper-bound estimate, per run (the largest implementation asked sets it): the weights in
the run's dtype (and again in float32 for the logits check), the KV cache, the live
activations of one decoder layer at once (the MLP's three intermediate-sized tensors and a few
hidden-sized ones), eager's score matrices (B·H·S² in the dtype and again upcast to float32
for its softmax), and the logits (B·S·vocab, in the dtype and in float32). A train step keeps
every layer's activations and the weights' gradients. The refusal names the most decoder
layers that would fit.
"""

from __future__ import annotations

from dataclasses import replace

from profiling.user_values import ConfigError
from profiling.workload.memory import available_bytes
from profiling.workload.model.spec import FLOAT32_BYTES, ModelWorkload

HEADROOM = 0.85
ACTIVATION_TENSORS = 6  # hidden-sized tensors alive in a layer besides the MLP's (q, k, v, …)


def parameters(workload: ModelWorkload) -> int:
    """The weights' count: embedding (and untied LM head), each layer's projections, MLP and
    norms, the final norm."""
    shape, values = workload.shape(), workload.spec.values
    attention = shape.hidden * shape.head_dim * (2 * shape.heads + 2 * shape.kv_heads)
    layer = attention + 3 * shape.hidden * shape.intermediate + 4 * shape.hidden
    heads = 1 if values.get("tie_word_embeddings") else 2
    return heads * shape.vocab * shape.hidden + shape.layers * layer + shape.hidden


def estimate_bytes(workload: ModelWorkload) -> int:
    """Peak bytes of the run (module docstring)."""
    size = workload.torch_dtype.itemsize
    shape, batch = workload.shape(), workload.batch
    tokens = batch * workload.seq_len
    keys = workload.seq_len + (workload.new_tokens if workload.mode == "decode" else 0)
    weights = parameters(workload) * size
    cache = 2 * shape.layers * batch * shape.kv_heads * keys * shape.head_dim * size
    layer = tokens * (3 * shape.intermediate + ACTIVATION_TENSORS * shape.hidden) * size
    scores = 0
    if "eager" in workload.implementations or workload.check:
        scores = batch * shape.heads * workload.seq_len * keys * (size + FLOAT32_BYTES)
    logits = tokens * shape.vocab * (size + FLOAT32_BYTES)
    need = weights + cache + layer + scores + logits
    if workload.mode == "train":
        need += weights + shape.layers * (layer + scores)  # gradients, every layer's saved
    if workload.check:  # float32 weights and eager's float32 pass beside the run's
        need += (
            parameters(workload) * FLOAT32_BYTES
            + tokens * (3 * shape.intermediate + ACTIVATION_TENSORS * shape.hidden) * FLOAT32_BYTES
        )
    return int(need)


def check_memory(workload: ModelWorkload, device: str, free: int | None = None) -> None:
    """Refuse before allocating when the estimate exceeds the usable memory; name the most
    layers that fit (or say none does)."""
    free = available_bytes(device) if free is None else free
    budget = int(HEADROOM * free)
    need = estimate_bytes(workload)
    if need <= budget:
        return
    fits = [
        n
        for n in range(1, workload.layers)
        if estimate_bytes(replace(workload, layers=n)) <= budget
    ]
    hint = (
        f"use at most {fits[-1]} decoder layers"
        if fits
        else "lower batch or seq_len (not even one layer fits)"
    )
    where = "GPU memory free" if device == "cuda" else "RAM available"
    raise ConfigError(
        f"{workload.text()} needs about {need / 1024**3:.1f} GiB but only "
        f"{free / 1024**3:.1f} GiB of {where} ({HEADROOM:.0%} usable): {hint}"
    )
