"""A model run on a CPU (profiling/run/model/): the tiny presets built by transformers, every
implementation a CPU runs is run, the others refused with their reason; the step's categories
add up; SDPA's backend and reasons come from the real call inside the model; logits errors
against eager in float32; decode's tokens per second."""

from __future__ import annotations

import pytest
import torch

from attention.variant import VariantUnavailable
from profiling.run.model import build as building
from profiling.run.model import kernels
from profiling.run.model.runner import run
from profiling.run.model.steps import make_step, prefill_logits
from profiling.workload.model.spec import ModelWorkload

RAGGED = {"batch": 2, "seq_len": 32, "lengths": "32,20", "dtype": "float32", "steps": 1}


@pytest.fixture(scope="module")
def prefill(tmp_path_factory):
    implementations = "eager,sdpa,sdpa-math,sdpa-efficient,sdpa-cudnn,kernels"
    workload = ModelWorkload.from_user(preset="tiny", implementations=implementations, **RAGGED)
    result = run(workload, tmp_path_factory.mktemp("model"))
    return {item.id: item for item in result.runs}, result


def test_cpu_runs_what_it_can_and_refuses_the_rest_with_reasons(prefill):
    runs, result = prefill
    assert result.device == "cpu"
    assert [key for key, item in runs.items() if item.ok] == ["eager", "sdpa", "sdpa-math"]
    assert "needs a CUDA GPU" in runs["sdpa-efficient"].refused
    assert "needs a CUDA GPU" in runs["sdpa-cudnn"].refused
    assert "kernels-hub FlashAttention needs a CUDA GPU" in runs["kernels"].refused
    assert not any(item.failed for item in runs.values())


def test_categories_add_up_to_the_step_and_each_layer_has_its_span(prefill):
    runs, _ = prefill
    for key in ("eager", "sdpa", "sdpa-math"):
        split = runs[key].split
        assert sum(split.categories.values()) == pytest.approx(split.step_us, rel=1e-6)
        assert 0 < split.attention_share < 1
        assert [index for index, _, _ in split.layers] == [0, 1]
        assert all(attention > 0 for _, _, attention in split.layers)
    drawn = str(runs["sdpa"].gantt.data)  # one span per decoder layer in the Gantt
    assert "model_layer_0" in drawn and "model_layer_1" in drawn


def test_sdpa_backend_and_reasons_from_the_call_inside_the_model(prefill):
    runs, _ = prefill
    assert runs["sdpa"].backend == "flash (CPU)"
    assert runs["sdpa-math"].backend == "math"
    account = runs["sdpa"].sdpa
    assert "mask (2, 1, 32, 32) bool" in account.call and "is_causal=False" in account.call
    assert account.chosen == "flash"
    assert runs["sdpa-math"].sdpa.chosen == "math"
    assert {backend for backend, _, _ in account.checks} == {"flash", "efficient", "cudnn"}
    assert runs["eager"].sdpa is None and runs["eager"].backend is None


def test_ran_says_which_backend_a_forced_row_allowed(prefill):
    runs, _ = prefill
    assert runs["sdpa"].ran == "sdpa" and runs["eager"].ran == "eager"
    assert runs["sdpa-math"].ran == "sdpa with only SDPA's math backend allowed"


def test_logits_errors_against_eager_in_float32(prefill):
    runs, _ = prefill
    for key in ("eager", "sdpa", "sdpa-math"):
        assert runs[key].logits_error is not None and runs[key].logits_error < 1e-5
    assert runs["sdpa"].pad.pad_tokens == 12


def test_a_soft_capped_model_refuses_sdpa_and_runs_eager(tmp_path):
    workload = ModelWorkload.from_user(
        preset="tiny-gemma-2", implementations="eager,sdpa", check=False, **RAGGED
    )
    runs = {item.id: item for item in run(workload, tmp_path).runs}
    assert "attn_logit_softcapping=50" in runs["sdpa"].refused
    assert runs["eager"].ok and runs["eager"].split.attention_share > 0


def test_decode_left_pads_and_reports_tokens_per_second(tmp_path):
    workload = ModelWorkload.from_user(
        preset="tiny", implementations="sdpa", mode="decode", new_tokens=3, **RAGGED
    )
    assert building.batch(workload, "cpu").attention_mask[1, :12].sum() == 0  # left-padded
    (result,) = run(workload, tmp_path).runs
    assert result.ok and result.tokens_per_s > 0
    assert "q (2, 4, 1, 16)" in result.sdpa.call  # the decode's own call: one query
    assert result.logits_error < 1e-5


def test_weights_are_filled_in_place_and_the_rotary_frequencies_recomputed():
    workload = ModelWorkload.from_user(preset="tiny", layers=1)
    model, seconds = building.build(workload, "cpu")
    again, _ = building.build(workload, "cpu")
    frequencies = model.model.rotary_emb.inv_freq
    assert frequencies[0] == 1.0 and bool((frequencies > 0).all())
    weight = model.model.layers[0].self_attn.q_proj.weight
    assert 0.01 < float(weight.detach().std()) < 0.03  # initializer_range, not garbage
    assert bool((weight == again.model.layers[0].self_attn.q_proj.weight).all())  # seeded
    assert seconds < 5


def test_a_train_step_runs_forward_and_backward(tmp_path):
    workload = ModelWorkload.from_user(
        preset="tiny", implementations="sdpa", mode="train", check=False, **RAGGED
    )
    (result,) = run(workload, tmp_path).runs
    assert result.ok
    assert sum(result.split.categories.values()) == pytest.approx(result.split.step_us, rel=1e-6)


class BottomRight:
    """FlashAttention's call and conventions (bottom-right causal, grouped K/V heads), in SDPA:
    the Triton build needs a GPU; what is tested here is the glue around it."""

    source, head_dims, calls = "reference", None, []

    @classmethod
    def flash_attn_func(cls, q, k, v, softmax_scale=None, causal=True, window_size=(-1, -1)):
        cls.calls.append((q.shape[1], k.shape[1]))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], 1) for t in (k, v))
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(k.shape[2] - q.shape[2])
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, keep, scale=softmax_scale)
        return out.transpose(1, 2)


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_the_triton_fallback_runs_each_sequence_on_its_real_tokens(mode):
    kernels._register(BottomRight)
    workload = ModelWorkload.from_user(preset="tiny", mode=mode, new_tokens=1, **RAGGED)
    model, _ = building.build(workload, "cpu")
    inputs = building.batch(workload, "cpu")
    eager = prefill_logits(model, inputs)[inputs.real]
    model.set_attn_implementation(kernels.FALLBACK)
    BottomRight.calls.clear()
    assert torch.allclose(prefill_logits(model, inputs)[inputs.real], eager, atol=1e-5)
    assert BottomRight.calls[:2] == [(32, 32), (20, 20)]  # no pads: one call a sequence
    if mode == "decode":
        make_step(workload, model, inputs, "cpu")()
        assert BottomRight.calls[-2:] == [(1, 33), (1, 21)]  # the new token against its keys


def test_a_forced_backend_torch_refuses_is_unavailable_with_torch_s_words():
    """SDPA's efficient backend pinned on a CPU: torch itself refuses the model's call (the
    rule that refuses it up front is bypassed here to reach torch's own refusal)."""
    from profiling.run.model.implementations import IMPLEMENTATIONS
    from profiling.run.model.runner import _first_call

    workload = ModelWorkload.from_user(preset="tiny", layers=1, implementations="sdpa", **RAGGED)
    model, _ = building.build(workload, "cpu")
    model.set_attn_implementation("sdpa")
    inputs = building.batch(workload, "cpu")
    forced = IMPLEMENTATIONS["sdpa-efficient"]
    with forced.context(), pytest.raises(VariantUnavailable, match="No viable backend"):
        _first_call(make_step(workload, model, inputs, "cpu"), forced)
    with IMPLEMENTATIONS["sdpa"].context():  # not forced: it runs, and its call is caught
        (call,) = _first_call(make_step(workload, model, inputs, "cpu"), IMPLEMENTATIONS["sdpa"])
    assert tuple(call.mask.shape) == (2, 1, 32, 32)
