"""On the H200: every variant at issue 21's three presets (GQA prefill, a decode against an
8192-key cache, a 1024-key sliding window). Each one either runs and matches float64, within
the memory estimate, or is unavailable with a reason (a known rule, or torch's own refusal):
never a failure, never a silent approximation.

Run with `python -m pytest -m gpu tests/gpu/test_gpu_inference.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from attention import VARIANTS
from profiling.run.reference import check as reference_check
from profiling.run.runner import VariantUnavailable
from profiling.workload.memory import REFERENCE_CHUNK, estimate_bytes
from profiling.workload.spec import Workload
from tests.gpu.test_gpu import whole_run_peak

pytestmark = pytest.mark.gpu

TOL = 2e-2  # bf16
PRESETS = {
    "prefill": dict(batch=4, heads=32, kv_heads=8, seq_len=4096, head_dim=128),
    "decode": dict(batch=16, heads=32, kv_heads=8, seq_len=8192, q_len=1, head_dim=128),
    "window": dict(batch=4, heads=32, kv_heads=8, seq_len=4096, head_dim=128, window=1024),
}
RESULTS = os.environ.get("ATTNPROF_RESULTS")


def record(row: dict) -> None:
    if RESULTS:
        Path(RESULTS).mkdir(parents=True, exist_ok=True)
        with open(Path(RESULTS) / "inference.jsonl", "a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("vid", list(VARIANTS))
def test_every_variant_at_every_preset(vid, preset, tmp_path, monkeypatch):
    workload = Workload.from_user(variant=vid, device="cuda", dtype="bfloat16", **PRESETS[preset])
    monkeypatch.setattr(
        reference_check, "REFERENCE_CHUNK", (REFERENCE_CHUNK[0], REFERENCE_CHUNK[0])
    )
    try:
        result, peak = whole_run_peak(monkeypatch, workload, tmp_path)
    except VariantUnavailable as exc:  # a rule or torch refused this input: say why
        assert str(exc).startswith(vid) and len(str(exc)) > len(vid) + 20
        record({"variant": vid, "preset": preset, "unavailable": str(exc)})
        return
    summary = result.summary
    record({"variant": vid, "preset": preset, **summary.as_dict(), "whole_peak": peak})
    assert summary.rel_err < TOL, summary.rel_err
    assert peak <= estimate_bytes(workload), (peak, estimate_bytes(workload))
    assert summary.bytes_moved == workload.io_bytes and summary.tbps > 0
    if preset == "decode":  # ~1 FLOP per byte of K and V: never the tensor cores' roof
        assert summary.roofline_bound != "compute", summary.roofline_bound
    if preset == "prefill" and vid == "sdpa-cudnn":
        assert summary.roofline_bound == "compute"


SHAPES_TOO = {
    "post": dict(batch=8, heads=16, seq_len=1024, head_dim=64),
    "long": dict(batch=4, heads=16, seq_len=4096, head_dim=128),
    **PRESETS,
}


@pytest.mark.parametrize("shape", list(SHAPES_TOO))
def test_sdpa_autos_pick_from_torchs_checks_is_the_kernel_the_trace_shows(shape, tmp_path):
    """Issue 22: the backend SDPA's dispatcher picks for the run's inputs is the one that ran."""
    from profiling.run.runner import run

    workload = Workload.from_user(variant="sdpa-auto", device="cuda", **SHAPES_TOO[shape])
    summary = run(workload, out_dir=tmp_path).summary
    found = summary.sdpa_backends
    record({"variant": "sdpa-auto", "preset": shape, "sdpa": found, "ran": summary.ran})
    assert summary.ran.startswith("SDPA ") and found["chosen"] in summary.ran, (found, summary.ran)
    accepted = {c["backend"] for c in found["checks"] if c["accepts"]} | {"math"}
    assert found["chosen"] in accepted  # it picks only a backend whose checks accept the input
