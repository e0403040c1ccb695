"""The decode of benchmarks/model_decode_busy.py, run bare and captured in a CUDA graph.

Two copies of the app's decode step (profiling/run/model/steps.py `_decode_step`: `new_tokens`
forwards of one token each against the prompt's KV cache, the padding mask grown by one column
a token), written so that a graph's replays read tensors that are still alive:

- `DynamicDecode`: the app's own cache (transformers' DynamicCache, grown by torch.cat) and its
  mask growth, token for token; the copy of the prompt's cache the capture read is held here.
- `StaticDecode`: transformers' StaticCache (its own API: `StaticCache(config, max_cache_len)`,
  filled with the prompt's keys and values, written in place at its `cumulative_length`); the
  masks are made before (one per token, the full cache length: 0 for slots not yet written),
  so each token attends to `max_cache_len` keys, up to `new_tokens` more than the app's (under
  2% of a 4096-token prompt). Its `cumulative_length` is reset before each run and replay,
  outside any timing.

A replay runs the step's kernels back to back with no launch gaps: its CUDA-event time is the
step's GPU work, timed without the profiler.
"""

from __future__ import annotations

import copy
import statistics
import time
import warnings

import torch
from transformers import StaticCache


class DynamicDecode:
    """The app's decode over a DynamicCache copy of the prompt's cache."""

    what = "DynamicCache (the app's decode, token for token)"

    def __init__(self, model, prompt_cache, inputs, tokens, new_tokens: int):
        self.model, self.prompt_cache, self.inputs = model, prompt_cache, inputs
        self.tokens, self.new_tokens = tokens, new_tokens
        self.cache, self.held = None, []

    def prepare(self) -> None:
        """A fresh copy of the prompt's cache; its tensors held (the cache swaps them out)."""
        self.cache = copy.deepcopy(self.prompt_cache)
        self.held = [t for layer in self.cache.layers for t in (layer.keys, layer.values)]

    def rearm(self) -> None:
        """Before a replay: nothing (the graph's torch.cat writes new tensors, never its input)."""

    def run(self) -> None:
        mask, last = self.inputs.attention_mask, self.inputs.position_ids[:, -1:]
        with torch.no_grad():
            for step in range(self.new_tokens):
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
                self.model(
                    input_ids=self.tokens[step], attention_mask=mask, position_ids=last + 1 + step,
                    past_key_values=self.cache, use_cache=True,
                )  # fmt: skip


class StaticDecode:
    """The same decode over transformers' StaticCache (module docstring)."""

    what = "StaticCache (transformers' API; masks made before, reset before each replay)"

    def __init__(self, model, prompt_cache, inputs, tokens, new_tokens: int):
        self.model, self.inputs, self.tokens, self.new_tokens = model, inputs, tokens, new_tokens
        batch, prompt = inputs.attention_mask.shape
        self.prompt = prompt
        self.cache = StaticCache(config=model.config, max_cache_len=prompt + new_tokens)
        for layer, source in zip(self.cache.layers, prompt_cache.layers, strict=True):
            layer.lazy_initialization(source.keys, source.values)
            layer.keys[:, :, :prompt].copy_(source.keys)
            layer.values[:, :, :prompt].copy_(source.values)
        full = inputs.attention_mask.new_zeros(batch, prompt + new_tokens)
        full[:, :prompt] = inputs.attention_mask
        self.masks = []
        for step in range(new_tokens):
            full = full.clone()
            full[:, prompt + step] = 1
            self.masks.append(full)

    def prepare(self) -> None:
        for layer in self.cache.layers:
            layer.cumulative_length.fill_(self.prompt)

    rearm = prepare

    def run(self) -> None:
        last = self.inputs.position_ids[:, -1:]
        with torch.no_grad():
            for step in range(self.new_tokens):
                self.model(
                    input_ids=self.tokens[step], attention_mask=self.masks[step],
                    position_ids=last + 1 + step, past_key_values=self.cache, use_cache=True,
                )  # fmt: skip


def timed_ms(run, prepare, device: str, repeat: int) -> list[float]:
    """`repeat` runs, each after its `prepare` (untimed): CUDA events on a GPU, else wall."""
    times = []
    for _ in range(repeat):
        prepare()
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            run()
            times.append((time.perf_counter() - began) * 1e3)
    return times


def host_syncs(decode) -> list[str]:
    """Where an uncaptured run synchronises with the GPU (file:line of the Python call, as
    torch's sync debug mode warns); a capture forbids them, though transformers takes other
    paths while a stream captures (its `is_tracing`), so these are hints, not verdicts."""
    decode.prepare()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            decode.run()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    torch.cuda.synchronize()
    places = {f"{w.filename.rsplit('/', 2)[-1]}:{w.lineno}" for w in heard
              if "synchronizing" in str(w.message)}  # fmt: skip
    return sorted(places)


def graph_ms(decode, replays: int) -> tuple[list[float], torch.cuda.CUDAGraph]:
    """Capture `decode.run` (after two warm-up runs on a side stream, as torch asks) and time
    `replays` replays with CUDA events, each rearmed first outside the timing."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            decode.prepare()
            decode.run()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    decode.prepare()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode.run()
    torch.cuda.synchronize()
    graph.replay()  # the first replay uploads the graph: not timed
    torch.cuda.synchronize()
    return timed_ms(graph.replay, decode.rearm, "cuda", replays), graph


def cuda_usable() -> str:
    """'' when CUDA still runs work after a failed capture, else why not."""
    try:
        (torch.ones(8, device="cuda") * 2).sum().item()
        torch.cuda.synchronize()
        return ""
    except Exception as exc:  # a failed capture can leave the context unusable
        return f"CUDA unusable after the failed capture: {type(exc).__name__}: {exc}"[:300]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
