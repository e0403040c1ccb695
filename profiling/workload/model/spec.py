"""What a model run is, and every check it must pass before anything is allocated.

Every value may come from an API call that ignored the page's controls: `from_user` reads the
loose values (text lists too: "4096,3000" or "eager, sdpa"), `validated` holds the rules, and
`check_memory` refuses a run that would not fit before any weight is made, naming the most
decoder layers that would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from profiling.analysis.model.padding import Shape, forward_flops
from profiling.user_values import ConfigError, show, whole_number
from profiling.vocabulary import DEVICES, DTYPE_NAMES
from profiling.workload.model.presets import PRESETS, Preset

# The implementations a model run can be asked for: transformers' own names, SDPA with each
# backend forced, and "kernels" (a kernels-hub FlashAttention, as transformers loads it).
IMPLEMENTATIONS = (
    "eager", "sdpa", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn",
    "flex_attention", "kernels",
)  # fmt: skip
MODES = ("prefill", "decode", "train")
LIMITS = {
    "layers": (1, 64), "batch": (1, 64), "seq_len": (8, 32768), "new_tokens": (1, 1024),
    "steps": (1, 20),
}  # fmt: skip
CPU_MAX_FLOPS = 2e10  # per step on a CPU (as a variant's run): the tiny presets fit easily
FLOAT32_BYTES = 4


@dataclass(frozen=True)
class ModelWorkload:
    """A preset cut to `layers` decoder layers, run on a (ragged) batch in one mode."""

    preset: str = "tiny"
    layers: int = 2
    dtype: str = "bfloat16"
    batch: int = 2
    seq_len: int = 64
    lengths: tuple[int, ...] | None = None  # each sequence's real tokens; None: all seq_len
    mode: str = "prefill"
    new_tokens: int = 8  # decode: tokens generated against the KV cache, one a step
    implementations: tuple[str, ...] = ("eager", "sdpa")
    device: str = "auto"
    steps: int = 2
    check: bool = True  # logits against eager's in float32

    @classmethod
    def from_user(cls, **raw: Any) -> ModelWorkload:
        """The caller's loose values (lists may be comma-separated text), validated."""
        unknown = set(raw) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown model field(s): {', '.join(sorted(map(show, unknown)))}")
        values = dict(raw)
        if "lengths" in values:
            values["lengths"] = whole_numbers("lengths", values["lengths"])
        if "implementations" in values:
            values["implementations"] = _text_list("implementations", values["implementations"])
        return cls(**values).validated()

    @property
    def spec(self) -> Preset:
        return PRESETS[self.preset]

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def real_lengths(self) -> tuple[int, ...]:
        return self.lengths or (self.seq_len,) * self.batch

    @property
    def ragged(self) -> bool:
        return any(n < self.seq_len for n in self.real_lengths)

    @property
    def padding_side(self) -> str:
        """Left for decode (new tokens follow every sequence's last real one), else right."""
        return "left" if self.mode == "decode" else "right"

    def validated(self) -> ModelWorkload:
        """Self, if every rule holds; else a ConfigError saying what to change."""
        _choice("preset", self.preset, tuple(PRESETS))
        _choice("dtype", self.dtype, DTYPE_NAMES)
        _choice("mode", self.mode, MODES)
        _choice("device", self.device, DEVICES)
        for name, limits in LIMITS.items():
            whole_number(name, getattr(self, name), limits)
        if self.layers > self.spec.layers:
            raise ConfigError(
                f"layers must be at most {self.spec.layers} ({self.preset} has that many), "
                f"got {self.layers}"
            )
        if not isinstance(self.check, bool):
            raise ConfigError(f"check must be true or false, got {show(self.check)}")
        self._check_lengths()
        self._check_implementations()
        positions = self.seq_len + (self.new_tokens if self.mode == "decode" else 0)
        most = int(self.spec.values["max_position_embeddings"])
        if positions > most:
            raise ConfigError(
                f"{self.preset} takes at most {most} positions; seq_len {self.seq_len}"
                + (f" + {self.new_tokens} new tokens" if self.mode == "decode" else "")
                + f" = {positions}"
            )
        return self

    def _check_lengths(self) -> None:
        if self.lengths is None:
            return
        if len(self.lengths) != self.batch:
            raise ConfigError(
                f"lengths gives {len(self.lengths)} sequence length(s) for a batch of "
                f"{self.batch}: give one per sequence"
            )
        for n in self.lengths:
            whole_number("each of lengths", n, (1, self.seq_len))

    def _check_implementations(self) -> None:
        if not self.implementations:
            raise ConfigError(f"implementations: name at least one of {', '.join(IMPLEMENTATIONS)}")
        for name in self.implementations:
            _choice("implementation", name, IMPLEMENTATIONS)
        if len(set(self.implementations)) != len(self.implementations):
            raise ConfigError("implementations: each implementation once")

    def shape(self) -> Shape:
        v = self.spec.values
        return Shape(
            hidden=v["hidden_size"], intermediate=v["intermediate_size"],
            heads=v["num_attention_heads"], kv_heads=v["num_key_value_heads"],
            head_dim=self.spec.head_dim, vocab=v["vocab_size"], layers=self.layers,
        )  # fmt: skip

    @property
    def step_flops(self) -> float:
        """One measured step's FLOPs with every position counted (pads too): a prefill, the
        decode's new tokens, or a train step (3× a forward)."""
        if self.mode == "decode":
            keys = self.seq_len + self.new_tokens
            return self.new_tokens * forward_flops(self.shape(), self.batch, 1, keys)
        forward = forward_flops(self.shape(), self.batch, self.seq_len, self.seq_len)
        return 3 * forward if self.mode == "train" else forward

    def text(self) -> str:
        ragged = f" lengths {','.join(map(str, self.real_lengths))}" if self.ragged else ""
        decode = f" +{self.new_tokens} tokens" if self.mode == "decode" else ""
        return (
            f"{self.preset} ×{self.layers} layers B{self.batch} S{self.seq_len}{ragged} "
            f"{self.dtype} {self.mode}{decode}"
        )


def _choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {show(value)}")


def whole_numbers(name: str, value: Any, most: int = LIMITS["batch"][1]) -> tuple[int, ...] | None:
    """At most `most` whole numbers, each a sequence length, from a list or comma-separated
    text ('' or None: not given): a ragged batch's lengths, a Sweep's."""
    if value is None or value == "" or value == []:
        return None
    items: Any = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or len(items) > most:
        raise ConfigError(f"{name} must be up to {most} whole numbers, got {show(value)}")
    numbers = []
    for item in items:
        text = item.strip() if isinstance(item, str) else item
        if isinstance(text, str):  # ASCII digits only: "³".isdigit(), and int() fails on it
            if not (text.isascii() and text.isdigit()) or len(text) > 18:
                raise ConfigError(
                    f"{name} must be whole numbers separated by commas, got {show(value)}"
                )
            text = int(text)
        numbers.append(whole_number(f"each of {name}", text, (1, LIMITS["seq_len"][1])))
    return tuple(numbers)


def _text_list(name: str, value: Any) -> tuple[str, ...]:
    items: Any = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or len(items) > len(IMPLEMENTATIONS):
        raise ConfigError(f"{name} must be a list of names, got {show(value)}")
    if not all(isinstance(item, str) for item in items):
        raise ConfigError(f"{name} must be names, got {show(value)}")
    return tuple(item.strip() for item in items if item.strip())
