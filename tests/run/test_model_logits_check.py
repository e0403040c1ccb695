"""The logits check made cheaper (issue 43's overhead) without changing what it reports: the
float32 reference over the real tokens only (the LM head after the gather, Gemma-2's final
soft-capping as transformers applies it), the weights upcast straight into the copy, the last
timed step's logits reused; the error equals the old computation's (a full float32 forward
over pads, then a forward more of the implementation) within float tolerance."""

from __future__ import annotations

import copy

import pytest
import torch

from profiling.run.model import build as building
from profiling.run.model.implementations import IMPLEMENTATIONS
from profiling.run.model.runner import run
from profiling.run.model.steps import prefill_logits, real_logits
from profiling.workload.model.spec import ModelWorkload

RAGGED = {"batch": 2, "seq_len": 32, "lengths": "32,20", "steps": 1}


def old_error(workload: ModelWorkload, name: str) -> float:
    """The check as the runner computed it before: deepcopy, upcast, every token's logits."""
    model, _ = building.build(workload, "cpu")
    inputs = building.batch(workload, "cpu")
    reference = copy.deepcopy(model).float()
    reference.set_attn_implementation("eager")
    expected = prefill_logits(reference, inputs)[inputs.real].float()
    implementation = IMPLEMENTATIONS[name]
    model.set_attn_implementation(implementation.attn_implementation)
    with implementation.context():
        logits = prefill_logits(model, inputs)[inputs.real].float()
    return float((logits - expected).abs().max() / expected.abs().max())


@pytest.mark.parametrize(
    ("preset", "names", "mode", "dtype"),
    [
        ("tiny", "eager,sdpa", "prefill", "bfloat16"),
        ("tiny-gemma-2", "eager", "prefill", "bfloat16"),
        ("tiny", "sdpa", "decode", "bfloat16"),
        ("tiny", "eager,sdpa-math", "prefill", "float32"),
    ],
)
def test_the_logits_error_is_the_old_computation_s(tmp_path, preset, names, mode, dtype):
    workload = ModelWorkload.from_user(
        preset=preset, implementations=names, mode=mode, dtype=dtype, new_tokens=2, **RAGGED
    )
    for item in run(workload, tmp_path).runs:
        assert item.ok, item.failed or item.refused
        old = old_error(workload, item.id)
        if dtype == "bfloat16":  # bfloat16's own error, ~1e-2: the same to float32's rounding
            assert old > 1e-3
            assert item.logits_error == pytest.approx(old, rel=1e-5)
        else:  # float32 against float32: both at float32's rounding
            assert item.logits_error == pytest.approx(old, abs=1e-6)


@pytest.mark.parametrize(
    ("preset", "mode", "lengths", "decoded"),
    [
        ("tiny", "prefill", "32,20", [32, 20]),
        ("tiny", "decode", "32,20", [32, 20]),  # left-padded
        ("tiny", "prefill", "", [64]),  # no pads: one forward of the batch
        ("tiny-gemma-2", "prefill", "32,20", [32, 20]),
    ],
)
def test_real_logits_are_the_model_s_logits_of_the_real_tokens(preset, mode, lengths, decoded):
    """Each sequence decoded on its real tokens alone, the LM head after, and the final
    soft-capping after the head: a cap low enough to bend every logit (the tiny model's
    logits are small) shows it applied once."""
    shape = {**RAGGED, "lengths": lengths}
    workload = ModelWorkload.from_user(preset=preset, dtype="float32", mode=mode, **shape)
    model, _ = building.build(workload, "cpu")
    inputs = building.batch(workload, "cpu")
    if preset == "tiny-gemma-2":
        model.config.final_logit_softcapping = 0.05
    expected = prefill_logits(model, inputs)[inputs.real]
    seen = []
    model.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    got = real_logits(model, inputs)
    assert seen == decoded
    assert got.shape == (sum(decoded), 512)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-7)
    if preset == "tiny-gemma-2":
        assert float(expected.abs().max()) <= 0.05 + 1e-6  # the cap did bend them
        with torch.no_grad():
            uncapped = model.lm_head(model.model(input_ids=inputs.input_ids).last_hidden_state)
        assert float(uncapped.abs().max()) > 0.1


def test_the_float32_copy_upcasts_each_weight_once_and_keeps_ties(monkeypatch):
    workload = ModelWorkload.from_user(preset="tiny-gemma-2", dtype="bfloat16", **RAGGED)
    model, _ = building.build(workload, "cpu")
    copied = []  # weights deep-copied in the model's dtype before the upcast: none
    deepcopy = torch.nn.Parameter.__deepcopy__
    monkeypatch.setattr(
        torch.nn.Parameter, "__deepcopy__",
        lambda self, memo: copied.append(self.dtype) or deepcopy(self, memo),
    )  # fmt: skip
    reference = building.float32_copy(model)
    assert copied == []
    monkeypatch.undo()
    old = copy.deepcopy(model).float()
    got, expected = dict(reference.named_parameters()), dict(old.named_parameters())
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[name], expected[name]) for name in got)
    assert all(p.dtype == torch.float32 for p in [*reference.parameters(), *reference.buffers()])
    assert reference.lm_head.weight is reference.model.embed_tokens.weight  # tied, as the model
    assert reference.config._attn_implementation == "eager"
    assert model.lm_head.weight.dtype == torch.bfloat16  # the model itself is left as it was
    pairs = zip(model.parameters(), reference.parameters(), strict=True)
    assert all(a.data_ptr() != b.data_ptr() for a, b in pairs)
    inv_freq = dict(reference.named_buffers())["model.rotary_emb.inv_freq"]
    assert torch.equal(inv_freq, dict(old.named_buffers())["model.rotary_emb.inv_freq"])
