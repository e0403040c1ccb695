"""Issue 36 on the H200 (`python -m pytest -m gpu tests/test_gpu_counters.py`): counters from
Nsight Compute against the model. The checks are benchmarks/counters_h200.py's (one rule each):
cuDNN reads Q, K and V once; naive's masked_fill reads and writes the scores, its copy is left
unmeasured (no kernel); every variant of the post at both shapes runs with counters or says why."""

from __future__ import annotations

import pytest

from benchmarks.counters_h200 import VARIANTS, counted, qkv_check, ran_or_said, scores_check
from benchmarks.shapes import SHAPES

pytestmark = pytest.mark.gpu


def test_cudnn_reads_q_k_and_v_once(tmp_path):
    result = counted("sdpa-cudnn", SHAPES["post"], tmp_path)
    assert result.counters.measured, result.counters.reason
    ok, said = qkv_check(result)
    assert ok, said


def test_naive_masked_fill_reads_and_writes_the_scores(tmp_path):
    result = counted("naive", SHAPES["post"], tmp_path)
    assert result.counters.measured, result.counters.reason
    ok, said = scores_check(result)
    assert ok, said


@pytest.mark.parametrize("shape_id", list(SHAPES))
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_runs_with_counters_or_says_why(variant, shape_id, tmp_path):
    result = counted(variant, SHAPES[shape_id], tmp_path)
    ok, said = ran_or_said(result)
    assert ok, said
    counters = result.counters
    assert counters.measured, said  # on the H200 ncu is there and counters are allowed
    assert 0 < len(counters.kernels) <= 64 and counters.missing == []
    assert (counters.kernels["dram_read_bytes"] > 0).any()
    assert result.summary.gpu_us_per_forward is not None  # the profiler's own, kept apart
