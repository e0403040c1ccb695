"""SDPA's own reasons (issue 22, point 2): torch's checks of each backend for the run's inputs,
its pick, and the pick held against the backend the trace shows."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from attention import sdpa_reasons
from attention.sdpa_reasons import SdpaCall
from profiling.run.runner import run
from profiling.views import profile as views_profile
from profiling.views.text import summary as summary_text
from profiling.views.text.summary import sdpa_account_rows, summary_rows
from profiling.workload.spec import Workload


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
    call = SdpaCall(q, q, q, None, True, False)
    checks = {c.backend: c for c in sdpa_reasons.backend_checks(call)}
    assert checks["flash"].reasons == ("Flash attention requires head_dim <= 256",)
    assert not checks["flash"].accepts and checks["efficient"].accepts
    assert checks["efficient"].reasons == ()
    # a CUDA check refusing a CPU tensor without a word: said so, not left blank
    assert checks["cudnn"].reasons == (sdpa_reasons.CPU_REFUSAL,)
    assert "a CUDA backend" in sdpa_reasons.CPU_REFUSAL and "_for_cpu" in sdpa_reasons.CPU_REFUSAL


def test_an_sdpa_run_reports_torchs_checks_and_its_pick_and_the_trace_agrees(tmp_path):
    summary = run(small("sdpa-auto"), out_dir=tmp_path).summary
    found = summary.sdpa_backends
    assert [c["backend"] for c in found["checks"]] == ["flash", "efficient", "cudnn"]
    assert found["chosen"] == "flash" and summary.ran == "SDPA flash (CPU)"
    assert not any("SDPA picks" in note for note in summary.notes)
    rows = dict(summary_rows(summary))
    # issue 31: the CPU's own flash kernel is not the CUDA backend torch's checks refuse
    assert rows["SDPA picks"].startswith(
        "flash: the CPU's own flash kernel (_scaled_dot_product_flash_attention_for_cpu)"
    )
    checks = rows["SDPA's checks"]
    assert "flash refuses" not in checks and "CUDA backends" in checks and "math" in checks
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
    call = SdpaCall(q, k, k, mask, False, False)
    assert sdpa_reasons.lower_right_backend(call) == "flash"
    answers["flash"] = False
    assert sdpa_reasons.lower_right_backend(call) == "efficient"
    answers["efficient"] = False
    assert sdpa_reasons.lower_right_backend(call) == "flash"  # CPU: flash
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION):
        picked = sdpa_reasons.chosen_backend(call)
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


FIXTURE = Path(__file__).parents[1] / "fixtures" / "h200_sdpa_checks_stderr.txt"


def test_c10s_printed_warnings_are_read_as_messages():
    """What the checks print on the H200 with nothing capturing (benchmarks/capture_fixtures.py):
    each "[W…] Warning: … (function …)" line is one message, without the prefix and suffix."""
    printed = FIXTURE.read_text().split("--stderr\n", 1)[1]
    messages = sdpa_reasons.c10_warnings(printed)
    assert messages[0] == (
        "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: "
        "float, Key dtype: float, and Value dtype: float instead."
    )
    assert len(messages) == 3 and messages[2].startswith("For dense input, both fused kernels")
    assert sdpa_reasons.c10_warnings("[W1 0 x.h:1] Warning: a\n  b (function f)\n") == ["a b"]


def test_the_checks_warnings_are_read_from_file_descriptor_2(monkeypatch):
    """The checks' bindings print through c10's handler, not Python's warnings: what reaches
    fd 2 during a check is its reason, and fd 2 is the same file afterwards."""
    import os

    def prints(params, debug):
        os.write(2, b"[W1201 19:03:51.3 sdp_utils_cpp.h:91] Warning: too wide (function check)\n")
        return False

    monkeypatch.setattr(torch.backends.cuda, "can_use_flash_attention", prints)
    before = os.fstat(2)
    q = torch.randn(1, 2, 8, 16)
    call = SdpaCall(q, q, q, None, True, False)
    checks = {c.backend: c for c in sdpa_reasons.backend_checks(call)}
    assert checks["flash"].reasons == ("too wide",)
    assert os.fstat(2).st_ino == before.st_ino


def test_a_pinned_variant_still_hears_each_backends_own_verdict(monkeypatch):
    """Asked inside sdpa-flash's pin, efficient's check still runs with efficient enabled: its
    reason is its own, not 'has been runtime disabled'."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    enabled = {}

    def efficient(params, debug):
        enabled["efficient"] = torch.backends.cuda.mem_efficient_sdp_enabled()
        return True

    monkeypatch.setattr(torch.backends.cuda, "can_use_efficient_attention", efficient)
    q = torch.randn(1, 2, 8, 16)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        sdpa_reasons.backend_checks(SdpaCall(q, q, q, None, True, False))
        assert not torch.backends.cuda.mem_efficient_sdp_enabled()  # the pin is back after
    assert enabled["efficient"] is True


def test_the_picker_shows_torchs_checks_at_the_shape_on_screen(monkeypatch):
    """Issue 22: the variant picker says, before any run, what torch's checks answer for the
    shape on screen: torch's own words (here a refusal planted in its check), its pick; nothing
    for a variant that picks no backend, or for a shape Profile would refuse."""
    from profiling.page import profile_tab

    shape = (256, "float32", 1, 4, 64, True)

    def refuses(params, debug=False):
        warnings.warn(
            "Flash attention requires q,k,v to have the same last dimension", stacklevel=2
        )
        return False

    monkeypatch.setattr(torch.backends.cuda, "can_use_flash_attention", refuses)
    said = profile_tab.sdpa_checks("sdpa-auto", *shape)
    # torch's own words, for the CUDA backend they are about (a CPU has its own flash)
    assert "CUDA flash refuses (Flash attention requires q,k,v to have the same last" in said
    assert "the CUDA backends (efficient, cudnn) refuse CPU tensors" in said
    assert said.endswith(
        "**Picks:** flash: the CPU's own flash kernel "
        "(_scaled_dot_product_flash_attention_for_cpu), not the CUDA one."
    )
    assert profile_tab.sdpa_checks("naive", *shape) == ""
    assert profile_tab.sdpa_checks("sdpa-auto", 256, "float32", 1, 4, 63, True) == ""  # D % 8
    assert "sdpa-cudnn is unavailable here: SDPA cuDNN needs a CUDA GPU" in (
        profile_tab.sdpa_checks("sdpa-cudnn", *shape)
    )
    decode = profile_tab.sdpa_checks("sdpa-auto", *shape, "forward", 2, 4, None)
    assert "causal_lower_right asks flash, then efficient" in decode


def test_the_pickers_inputs_are_empty_tensors_of_the_workloads_shapes():
    from profiling.run.sdpa_account import empty_inputs

    workload = small("sdpa-flash", q_len=4, kv_heads=1, mode="train")
    q, k, v = empty_inputs(workload, "cpu")
    assert q.shape == (1, 2, 4, 16) and k.shape == v.shape == (1, 1, 64, 16)
    assert q.requires_grad and q.dtype == torch.float32


def test_the_pickers_fields_are_the_shape_controls_in_their_order():
    import gradio as gr

    from profiling.page import controls, profile_tab

    with gr.Blocks():
        assert tuple(controls.shape_controls("t")) == profile_tab.SHAPE_ORDER


def test_a_gpu_account_names_each_backends_verdict_and_a_cpu_account_says_which_flash():
    """On a GPU the checks are the backends SDPA picks from; on a CPU they are CUDA's, and the
    pick is the CPU's own kernel (issue 31: 'picks flash · flash refuses' contradicted itself)."""
    refusal = sdpa_reasons.CPU_REFUSAL
    cpu = {
        "checks": [
            {"backend": b, "accepts": False, "reasons": [refusal]} for b in sdpa_reasons.CHECKS
        ],
        "chosen": "flash",
    }
    gpu = {
        "checks": [
            {"backend": "flash", "accepts": True, "reasons": []},
            {"backend": "efficient", "accepts": False, "reasons": ["needs head_dim <= 128"]},
        ],
        "chosen": "flash",
    }
    assert sdpa_account_rows(gpu, "cuda") == [
        ("SDPA's checks", "flash accepts · efficient refuses (needs head_dim <= 128) · math "
         "accepts everything"),
        ("SDPA picks", "flash"),
    ]  # fmt: skip
    rows = dict(sdpa_account_rows(cpu, "cpu"))
    assert "refuses (" not in rows["SDPA's checks"]
    assert rows["SDPA's checks"].startswith("the CUDA backends (flash, efficient, cudnn) refuse")
    assert "its own flash kernel" in rows["SDPA's checks"]
    assert summary_text.CPU_FLASH_KERNEL == sdpa_reasons.CPU_FLASH_KERNEL  # spelled alike
    assert summary_text.CPU_REFUSAL == sdpa_reasons.CPU_REFUSAL
    assert "not the CUDA" in rows["SDPA picks"]
    assert dict(sdpa_account_rows({**cpu, "chosen": "math"}, "cpu"))["SDPA picks"] == "math"
    markdown = views_profile.sdpa_checks_markdown(cpu, "cpu")
    assert "flash refuses" not in markdown and "_for_cpu" in markdown
