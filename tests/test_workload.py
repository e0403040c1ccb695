"""Validation refuses bad configs before anything is allocated, with messages that help."""

from __future__ import annotations

import math

import pytest
import torch

from attention import Problem
from profiling.memory_estimate import check_memory, estimate_bytes, largest_fitting_seq_len
from profiling.workload import ConfigError, Workload


def test_defaults_are_the_posts_shape():
    c = Workload.from_user()
    assert (c.batch, c.heads, c.seq_len, c.head_dim, c.dtype, c.causal) == (
        8,
        16,
        1024,
        64,
        "bfloat16",
        True,
    )
    assert c.shape_tag("cuda") == "8_16_1024_64_bfloat16_causal_cuda_3steps"
    assert c.tag("cuda") == f"{c.variant}_8_16_1024_64_bfloat16_causal_cuda_3steps"


def test_problem_is_what_a_variant_is_built_for():
    c = Workload.from_user(batch=2, heads=3, seq_len=64, head_dim=16, dtype="float16",
                            causal=False)  # fmt: skip
    assert c.problem("cpu") == Problem(2, 3, 64, 16, False, torch.float16, "cpu")


def test_integral_floats_from_sliders_are_accepted():
    assert Workload.from_user(seq_len=512.0).seq_len == 512


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"variant": "nope"}, "unknown variant 'nope'"),
        ({"dtype": "float64"}, "unknown dtype"),
        ({"device": "tpu"}, "unknown device"),
        ({"seq_len": 0}, "seq_len must be between 16 and 131072"),
        ({"seq_len": -5}, "between"),
        ({"seq_len": 2**63}, "between"),
        ({"seq_len": 100.5}, "whole number"),
        ({"seq_len": math.nan}, "whole number"),
        ({"seq_len": math.inf}, "whole number"),
        ({"seq_len": "1024"}, "whole number"),
        ({"seq_len": True}, "whole number"),
        ({"seq_len": None}, "missing"),
        ({"batch": 65}, "batch must be between 1 and 64"),
        ({"head_dim": 60}, "multiple of 8"),
        ({"steps": 0}, "steps must be between"),
        ({"causal": "maybe"}, "causal must be true or false"),
        ({"variant": 3}, "variant must be text"),
        ({"bogus": 1}, "unknown parameter"),
        ({"batch": 64, "heads": 128, "seq_len": 131072, "head_dim": 256}, "2³¹"),
    ],
)
def test_bad_input_is_refused_clearly(raw, message):
    with pytest.raises(ConfigError, match=message):
        Workload.from_user(**raw)


def test_estimate_grows_with_the_score_matrices():
    # at S=2048 the profiled steps, not the float64 reference check, set both naive peaks
    naive = Workload.from_user(variant="naive", seq_len=2048)
    inplace = Workload.from_user(variant="naive-inplace", seq_len=2048)
    math_ = Workload.from_user(variant="sdpa-math", seq_len=2048)
    scores = 8 * 16 * 2048 * 2048 * 2  # one bf16 score matrix
    assert estimate_bytes(naive) - estimate_bytes(inplace) == scores
    assert estimate_bytes(math_) > estimate_bytes(naive)  # FP32 scores


def test_memory_refusal_names_the_need_and_the_fix(monkeypatch):
    monkeypatch.setattr("profiling.memory_estimate.available_bytes", lambda device: 8 * 1024**3)
    big = Workload.from_user(variant="naive", seq_len=65536)
    with pytest.raises(ConfigError) as info:
        check_memory(big, "cuda")
    text = str(info.value)
    assert "needs about" in text and "GiB" in text and "reduce seq_len to" in text
    fit = largest_fitting_seq_len(big, int(0.85 * 8 * 1024**3))
    assert fit and estimate_bytes(big.with_(seq_len=fit)) <= 0.85 * 8 * 1024**3
    spare = check_memory(big.with_(seq_len=fit), "cuda")  # the suggestion really fits
    assert spare == int(0.85 * 8 * 1024**3) - estimate_bytes(big.with_(seq_len=fit)) >= 0
