"""The model workload (profiling/workload/model/): presets through transformers' own config
classes with the published hyperparameters, each field's rule, the memory refusal."""

from __future__ import annotations

from dataclasses import replace

import pytest

from profiling.user_values import ConfigError
from profiling.workload.model import memory, presets
from profiling.workload.model.spec import ModelWorkload


def test_presets_build_through_transformers_config_classes():
    gemma = presets.build_config("gemma-2-9b", 2)
    assert type(gemma).__name__ == "Gemma2Config"
    assert (gemma.head_dim, gemma.attn_logit_softcapping, gemma.sliding_window) == (256, 50.0, 4096)
    assert gemma.layer_types == ["sliding_attention", "full_attention"]  # local, then global
    assert gemma.num_hidden_layers == 2
    mistral = presets.build_config("mistral-7b", 2)
    assert type(mistral).__name__ == "MistralConfig" and mistral.sliding_window == 4096
    llama = presets.build_config("llama-3.1-8b", 2)
    assert (llama.num_attention_heads, llama.num_key_value_heads, llama.head_dim) == (32, 8, 128)
    assert llama.rope_parameters["rope_type"] == "llama3"
    qwen = presets.build_config("qwen2.5-7b", 2)
    assert (qwen.hidden_size, qwen.num_key_value_heads) == (3584, 4)
    for preset in presets.PRESETS.values():
        assert preset.source


def test_defaults_and_loose_values():
    workload = ModelWorkload.from_user(
        preset="tiny", batch=3, seq_len=64, lengths="64, 40,8",
        implementations="eager, sdpa",
    )  # fmt: skip
    assert workload.lengths == (64, 40, 8) and workload.ragged
    assert workload.implementations == ("eager", "sdpa")
    assert workload.layers == 2 and workload.padding_side == "right"
    assert ModelWorkload.from_user(mode="decode").padding_side == "left"
    assert not ModelWorkload.from_user(batch=2, lengths=[64, 64]).ragged


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"preset": "llama-9000"}, "preset must be one of"),
        ({"layers": 0}, "layers must be between"),
        ({"layers": 5}, "layers must be at most 4"),
        ({"dtype": "float8"}, "dtype must be one of"),
        ({"mode": "generate"}, "mode must be one of"),
        ({"batch": 2, "lengths": "64"}, "gives 1 sequence length"),
        ({"batch": 2, "lengths": "64,65"}, "each of lengths must be between 1 and 64"),
        ({"batch": 2, "lengths": "64,x"}, "whole numbers separated by commas"),
        ({"batch": 2, "lengths": [64, True]}, "must be a whole number"),
        ({"implementations": "eager,flash_attention_9"}, "implementation must be one of"),
        ({"implementations": "eager,eager"}, "each implementation once"),
        ({"implementations": ""}, "name at least one"),
        ({"seq_len": 2048, "mode": "decode", "new_tokens": 8}, "at most 2048 positions"),
        ({"check": "yes"}, "check must be true or false"),
        ({"steps": 0}, "steps must be between"),
        ({"colour": "red"}, "unknown model field"),
    ],
)
def test_each_rule_refuses_with_its_message(raw, message):
    with pytest.raises(ConfigError, match=message):
        ModelWorkload.from_user(**raw)


def test_memory_refusal_names_the_layers_that_fit():
    workload = ModelWorkload.from_user(
        preset="llama-3.1-8b", layers=8, batch=4, seq_len=4096, implementations="sdpa"
    )
    one_layer = memory.estimate_bytes(replace(workload, layers=1))
    per_layer = memory.estimate_bytes(workload) - one_layer
    free = int((one_layer + 2.5 * per_layer / 7) / memory.HEADROOM)
    with pytest.raises(ConfigError, match="use at most 3 decoder layers"):
        memory.check_memory(workload, "cuda", free=free)
    memory.check_memory(workload, "cuda", free=10 * memory.estimate_bytes(workload))
    with pytest.raises(ConfigError, match="not even one layer fits"):
        memory.check_memory(workload, "cuda", free=one_layer // 2)


def test_eager_and_the_check_cost_their_score_matrices():
    sdpa = ModelWorkload.from_user(preset="llama-3.1-8b", seq_len=4096, implementations="sdpa",
                                   check=False)  # fmt: skip
    eager = ModelWorkload.from_user(preset="llama-3.1-8b", seq_len=4096, implementations="eager",
                                    check=False)  # fmt: skip
    scores = 2 * 32 * 4096 * 4096 * (2 + 4)
    assert memory.estimate_bytes(eager) - memory.estimate_bytes(sdpa) == scores
