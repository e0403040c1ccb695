"""SDPA's own reasons (issue 22, point 2): torch's checks of each backend for the run's inputs,
its pick, and the pick held against the backend the trace shows."""

from __future__ import annotations

import warnings

import pytest
import torch

from attention import sdpa_reasons
from profiling.runner import run
from profiling.summary_text import summary_rows
from profiling.workload import Workload


def small(variant: str, **shape) -> Workload:
    base = dict(seq_len=64, batch=1, heads=2, head_dim=16, dtype="float32", device="cpu")
    return Workload.from_user(variant=variant, **{**base, **shape})


REFUSED = "Flash attention requires head_dim <= 256 (Triggered internally at x.cpp:1.)"


def test_torchs_warnings_are_the_reasons_without_their_source_locations(monkeypatch):
    """On a GPU the checks warn why they refuse (debug=True): those words, cleaned, each once."""

    def refuses(params, debug):
        assert debug is True
        for _ in range(2):
            warnings.warn(REFUSED, stacklevel=2)
        return False

    monkeypatch.setattr(torch.backends.cuda, "can_use_flash_attention", refuses)
    monkeypatch.setattr(torch.backends.cuda, "can_use_efficient_attention", lambda p, d: True)
    q = torch.randn(1, 2, 8, 16)
    checks = {c.backend: c for c in sdpa_reasons.backend_checks(q, q, q, None, True, False)}
    assert checks["flash"].reasons == ("Flash attention requires head_dim <= 256",)
    assert not checks["flash"].accepts and checks["efficient"].accepts
    assert checks["efficient"].reasons == ()
    # a CUDA check refusing a CPU tensor without a word: said so, not left blank
    assert checks["cudnn"].reasons == ("a CUDA backend: its checks refuse tensors on the CPU",)


def test_an_sdpa_run_reports_torchs_checks_and_its_pick_and_the_trace_agrees(tmp_path):
    summary = run(small("sdpa-auto"), out_dir=tmp_path).summary
    found = summary.sdpa_backends
    assert [c["backend"] for c in found["checks"]] == ["flash", "efficient", "cudnn"]
    assert found["chosen"] == "flash" and summary.ran == "SDPA flash (CPU)"
    assert not any("SDPA picks" in note for note in summary.notes)
    rows = dict(summary_rows(summary))
    assert rows["SDPA picks"] == "flash" and "math accepts everything" in rows["SDPA's checks"]
    assert run(small("naive"), out_dir=tmp_path / "n").summary.sdpa_backends is None


def test_a_pick_the_trace_contradicts_is_said(monkeypatch, tmp_path):
    from attention import sdpa

    monkeypatch.setattr(sdpa, "chosen_backend", lambda *args: "efficient")
    summary = run(small("sdpa-auto"), out_dir=tmp_path).summary
    assert "SDPA picks efficient for these inputs, but the trace shows flash (CPU)" in (
        summary.notes
    )


@pytest.mark.parametrize("shape", [dict(q_len=16), dict(window=8)])
def test_a_masked_call_is_checked_with_the_mask_it_passes(shape, tmp_path):
    """A window is an explicit mask; causal_lower_right dispatches on its own first."""
    found = run(small("sdpa-auto", **shape), out_dir=tmp_path).summary.sdpa_backends
    assert found["through_causal_bias"] == ("q_len" in shape)


def test_lower_right_follows_causal_biass_own_order(monkeypatch):
    """flash if it accepts the unmasked call, else efficient, else the dispatcher's pick for
    the materialized mask; and a pinned backend refusing the mask is 'none', not a crash."""
    cuda = torch.backends.cuda
    q = torch.randn(1, 2, 4, 16)
    k = torch.randn(1, 2, 20, 16)
    mask = torch.ones(4, 20, dtype=torch.bool)
    answers = {"flash": True, "efficient": True}
    monkeypatch.setattr(cuda, "can_use_flash_attention", lambda p, d=False: answers["flash"])
    monkeypatch.setattr(
        cuda, "can_use_efficient_attention", lambda p, d=False: answers["efficient"]
    )
    assert sdpa_reasons.lower_right_backend(q, k, k, mask, False) == "flash"
    answers["flash"] = False
    assert sdpa_reasons.lower_right_backend(q, k, k, mask, False) == "efficient"
    answers["efficient"] = False
    assert sdpa_reasons.lower_right_backend(q, k, k, mask, False) == "flash"  # CPU: flash
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION):
        picked = sdpa_reasons.chosen_backend(q, k, k, mask, False, False)
    assert picked.startswith("none: ")


def test_a_library_that_cannot_explain_itself_does_not_fail_the_run(monkeypatch, tmp_path):
    from attention import sdpa

    def broken(*args):
        raise AttributeError("torch moved its private helper")

    monkeypatch.setattr(sdpa, "backend_checks", broken)
    summary = run(small("sdpa-auto"), out_dir=tmp_path).summary
    assert summary.rel_err < 1e-5
    assert summary.sdpa_backends == {
        "checks": [],
        "chosen": "unknown (AttributeError: torch moved its private helper)",
    }
    assert not any("SDPA picks" in note for note in summary.notes)  # no pick, no contradiction
