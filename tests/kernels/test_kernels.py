"""Kernel-name decoding states this app's context only for this app's own runs.

`reduce_kernel` is the math backend's _safe_softmax guard in a run this app made; in an uploaded
trace it is any reduction. The caller that knows where the trace came from says so (`own_run`):
the runner for its runs, Analyse for uploads.
"""

from __future__ import annotations

import pytest

from profiling.analysis.analyze import analyze
from profiling.kernels import names as kernels
from profiling.run import records as small_trace
from profiling.run import runner
from profiling.run import trace as run_trace
from profiling.workload.spec import Workload
from tests.conftest import FIXTURES

# Every phrase that holds only for this app's own runs, from the rule table itself.
OURS = [hint.ours for hint in kernels._HINTS if hint.ours]
SDPA_MATH = FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
OWN_TRITON = FIXTURES / "h200_kernels-local-triton_8_16_1024_64_bf16.json.gz"


def app_context(texts) -> list[str]:
    """The texts that state any of this app's context."""
    return [text for text in texts if any(phrase in text for phrase in OURS)]


@pytest.mark.parametrize(
    ("name", "says", "ours"),
    [
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<bool>>(...)",
         "reduction kernel", "_safe_softmax"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>(...)",
         "elementwise multiply", "`* scale`"),
        ("void at::native::triu_tril_kernel<bool, long, false, 4, true>(...)",
         "triangular matrix", "causal mask"),
        ("void at::native::elementwise_kernel<128, 4, masked_fill_kernel>(...)",
         "masked_fill: writes one value", "-inf above the diagonal"),
        ("void at::native::elementwise_kernel<128, 2, where_kernel_impl>(...)",
         "where: picks elementwise", "selects from the mask"),
        ("Memcpy DtoD (Device -> Device)", "device→device copy", "whole tensor duplicated"),
        ("_flash_fwd_kernel", "FlashAttention forward", "our Triton FlashAttention"),
    ],
)  # fmt: skip
def test_app_context_only_for_own_runs(name, says, ours):
    uploaded, own = kernels.decode(name), kernels.decode(name, own_run=True)
    assert says in uploaded and ours not in uploaded
    assert ours in own
    assert kernels.decode(name, own_run=False) == uploaded  # the default is the upload's reading


@pytest.mark.parametrize(
    "name", ["_flash_fwd_kernel", "_flash_fwd_tma_kernel", "_flash_fwd_ws_kernel"]
)
def test_own_triton_kernel_replaces_the_generic_flash_phrase(name):
    """Each of our forwards' kernels (pointer, TMA, warp-specialised Gluon: the default route
    takes the last two at long head-dim-128 shapes) is named as ours in our own runs."""
    assert kernels.decode(name) == "FlashAttention forward"
    assert kernels.decode(name, own_run=True) == (
        "our Triton FlashAttention (attention/flash_triton)"
    )


@pytest.mark.parametrize(
    "name",
    ["_flash_bwd_preprocess", "_flash_bwd_dkdv", "_flash_bwd_dkdv_tma",
     "_flash_bwd_dkdv_ws_kernel", "_flash_bwd_dq"],
)  # fmt: skip
def test_own_backward_kernels_are_named_ours_in_our_runs(name):
    """The backward's kernels, the warp-specialised Gluon dK/dV pass among them (the default
    route at one query head per K/V head), are named as ours in our own runs."""
    assert kernels.decode(name, own_run=True) == (
        "our Triton FlashAttention's backward (attention/flash_triton)"
    )


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json.gz")), ids=lambda p: p.name[:-8])
def test_an_uploaded_trace_says_only_what_the_names_say(path):
    result = analyze(path)
    assert not result.kernels.empty
    assert app_context(result.kernels["decoded"]) == []
    assert app_context([result.stats.dominant_decoded, *(v for _, v in result.summary)]) == []


def test_analysing_a_run_of_ours_still_reads_it_as_an_upload():
    # this app's own H200 traces, uploaded: Analyse cannot know where a file came from
    kernels_math = analyze(SDPA_MATH).kernels.set_index("kernel")["decoded"]
    assert kernels_math["reduce_kernel"] == "reduction kernel"
    assert kernels_math["vectorized_elementwise_kernel (mul)"].startswith("elementwise multiply;")
    assert analyze(OWN_TRITON).stats.dominant_decoded == "FlashAttention forward"


def cpu_run(tmp_path) -> runner.ProfileResult:
    config = Workload.from_user(
        variant="naive-inplace", seq_len=64, batch=1, heads=1, head_dim=16, dtype="float32",
        device="cpu",
    )  # fmt: skip
    return runner.run(config, out_dir=tmp_path)


def read_instead(path, small_path: bool, monkeypatch) -> None:
    """The run reads `path` in place of its own trace (a CPU run has no kernels), through the
    runner's small-trace path or its trace-model path."""
    read = run_trace.read
    monkeypatch.setattr(run_trace, "read", lambda _, *phases: read(path, *phases))
    if not small_path:
        monkeypatch.setattr(small_trace, "parse", lambda _: None)


PATHS = pytest.mark.parametrize("small_path", [True, False], ids=["small-trace", "trace-model"])


@PATHS
def test_a_run_of_ours_keeps_the_app_context(small_path, tmp_path, monkeypatch):
    read_instead(SDPA_MATH, small_path, monkeypatch)  # this app's H200 sdpa-math run
    table = cpu_run(tmp_path).kernels.set_index("kernel")["decoded"]
    assert "_safe_softmax" in table["reduce_kernel"]
    assert "`* scale`" in table["vectorized_elementwise_kernel (mul)"]
    assert "causal mask" in table["triu_tril_kernel"]


@PATHS
def test_a_run_of_ours_names_its_own_dominant_kernel(small_path, tmp_path, monkeypatch):
    read_instead(OWN_TRITON, small_path, monkeypatch)
    summary = cpu_run(tmp_path).summary
    assert summary.dominant_decoded == "our Triton FlashAttention (attention/flash_triton)"
