"""Architecture presets: transformers' own config classes, filled with the hyperparameters each
model's published config.json gives (copied here, so nothing is downloaded: the Hub is
unreachable on many users' machines). Only the number of decoder layers is the user's.

Each preset names the config class and the config.json it was copied from; the tiny presets
keep the real models' structure (grouped K/V heads, Gemma-2's soft-capping and local/global
layers) at a size a CPU runs in well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import transformers


@dataclass(frozen=True)
class Preset:
    """One architecture: its config class, the published hyperparameters, where they are from."""

    config_class: str  # a transformers config class, e.g. "LlamaConfig"
    values: dict[str, Any]
    source: str  # the config.json the values were copied from

    @property
    def layers(self) -> int:
        """The model's own number of decoder layers (the most a run may build)."""
        return int(self.values["num_hidden_layers"])

    @property
    def head_dim(self) -> int:
        return int(
            self.values.get("head_dim")
            or self.values["hidden_size"] // self.values["num_attention_heads"]
        )

    @property
    def softcap(self) -> float | None:
        """Gemma-2's attention logit soft-capping (None: the model has none)."""
        return self.values.get("attn_logit_softcapping")

    @property
    def sliding_window(self) -> int | None:
        if self.values.get("use_sliding_window") is False:
            return None
        return self.values.get("sliding_window")


LLAMA_31_8B = {
    "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "attention_bias": False, "mlp_bias": False,
    "rope_scaling": {
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192, "rope_type": "llama3",
    },
    "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001,
}  # fmt: skip
QWEN_25_7B = {
    "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "hidden_act": "silu", "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "sliding_window": 131072, "use_sliding_window": False,
    "max_window_layers": 28, "tie_word_embeddings": False,
    "bos_token_id": 151643, "eos_token_id": 151643,
}  # fmt: skip
MISTRAL_7B = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
    "bos_token_id": 1, "eos_token_id": 2,
}  # fmt: skip
GEMMA_2_9B = {
    "vocab_size": 256000, "hidden_size": 3584, "intermediate_size": 14336,
    "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
    "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
}  # fmt: skip
TINY = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}  # fmt: skip
TINY_GEMMA_2 = {
    **{key: GEMMA_2_9B[key] for key in ("hidden_activation", "attn_logit_softcapping",
                                        "final_logit_softcapping", "rope_theta")},
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "query_pre_attn_scalar": 16, "sliding_window": 32, "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
}  # fmt: skip

HUB = "https://huggingface.co"
PRESETS: dict[str, Preset] = {
    "tiny": Preset("LlamaConfig", TINY, "Llama's structure at toy size (runs on a CPU)"),
    "tiny-gemma-2": Preset(
        "Gemma2Config", TINY_GEMMA_2, "Gemma-2's structure at toy size (runs on a CPU)"
    ),
    "llama-3.1-8b": Preset(
        "LlamaConfig", LLAMA_31_8B, f"{HUB}/meta-llama/Llama-3.1-8B/blob/main/config.json"
    ),
    "qwen2.5-7b": Preset("Qwen2Config", QWEN_25_7B, f"{HUB}/Qwen/Qwen2.5-7B/blob/main/config.json"),
    "mistral-7b": Preset(
        "MistralConfig", MISTRAL_7B, f"{HUB}/mistralai/Mistral-7B-v0.1/blob/main/config.json"
    ),
    "gemma-2-9b": Preset(
        "Gemma2Config", GEMMA_2_9B, f"{HUB}/google/gemma-2-9b/blob/main/config.json"
    ),
}


def build_config(name: str, layers: int) -> transformers.PretrainedConfig:
    """The preset's config, through its own transformers class, cut to `layers` decoder
    layers (Gemma-2's local/global pattern is the class's own for that count)."""
    preset = PRESETS[name]
    config_class = getattr(transformers, preset.config_class)
    return config_class(**{**preset.values, "num_hidden_layers": layers})
