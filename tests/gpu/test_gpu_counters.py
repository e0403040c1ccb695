"""Issue 36 on the GPU (`python -m pytest -m gpu tests/gpu/test_gpu_counters.py`): counters
from Nsight Compute against the model. The checks are benchmarks/counters_h200.py's (one rule
each): cuDNN reads Q, K and V once; naive's masked_fill reads and writes the scores, its copy
is left unmeasured (no kernel); every variant of the post at both shapes runs with counters or
says why.

Each (variant, shape) is counted once for the module (issue 41: the module took > 150 s on an
H100 when the cuDNN and naive checks counted their runs again, and 200 s counting each once in
turn, ~15 s a pass): twelve runs, their profiled runs one by one, then their passes (one step
each under ncu, restricted to the NVTX range's kernels, METRICS only, at most 64 launches) side
by side, so that the passes' start-ups overlap. With ATTNPROF_RESULTS=dir the table and
the measured roofline are written there (benchmarks/counters_h200.py's files), with each run's
seconds under ncu.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from benchmarks.counters_h200 import (
    VARIANTS,
    _checks,
    _figure,
    _write,
    counted_together,
    measured_rows,
    qkv_check,
    ran_or_said,
    scores_check,
)
from benchmarks.shapes import SHAPES

pytestmark = pytest.mark.gpu
RESULTS = os.environ.get("ATTNPROF_RESULTS")


class Counted:
    """Every (variant, shape)'s counted run, made together on first use and kept for the
    module: the profiled runs one by one, then their counter passes side by side
    (benchmarks/counters_h200.counted_together)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.runs = folder, {}
        self.results = Path(RESULTS) if RESULTS else None

    def __call__(self, variant: str, shape_id: str):
        if not self.runs:
            began = time.perf_counter()
            pairs = [(v, s) for s in SHAPES for v in VARIANTS]
            self.runs = counted_together(pairs, self.folder)
            print(f"{len(pairs)} counted runs in {time.perf_counter() - began:.1f} s")
            for key, result in self.runs.items():
                if self.results is not None:
                    self._keep(*key, result)
        return self.runs[(variant, shape_id)]

    def _keep(self, variant: str, shape_id: str, result) -> None:
        self.results.mkdir(parents=True, exist_ok=True)
        rows = measured_rows(result).assign(variant=variant)
        _write(self.results, variant, shape_id, result, _checks(result, variant, shape_id), rows)
        with open(self.results / "counters-seconds.jsonl", "a") as fh:
            fh.write(json.dumps({"variant": variant, "shape": shape_id,
                                 "run_s": round(result.seconds, 1),
                                 "ncu_s": round(result.counters.seconds, 1)}) + "\n")  # fmt: skip

    def figure(self) -> None:
        import pandas as pd

        post = [
            measured_rows(result).assign(variant=variant)
            for (variant, shape_id), result in self.runs.items()
            if shape_id == "post"
        ]
        if self.results is not None and post:
            rows = pd.concat([r[r["role"] != ""] for r in post], ignore_index=True)
            device = next(iter(self.runs.values())).summary.device_name
            _figure(rows, self.results / "roofline-measured-post", device)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    kept = Counted(tmp_path_factory.mktemp("counters"))
    yield kept
    kept.figure()


def test_cudnn_reads_q_k_and_v_once(runs):
    result = runs("sdpa-cudnn", "post")
    assert result.counters.measured, result.counters.reason
    ok, said = qkv_check(result)
    assert ok, said


def test_naive_masked_fill_reads_and_writes_the_scores(runs):
    result = runs("naive", "post")
    assert result.counters.measured, result.counters.reason
    ok, said = scores_check(result)
    assert ok, said


@pytest.mark.parametrize("shape_id", list(SHAPES))
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_runs_with_counters_or_says_why(variant, shape_id, runs):
    result = runs(variant, shape_id)
    ok, said = ran_or_said(result)
    assert ok, said
    counters = result.counters
    assert counters.measured, said  # on the GPU machine ncu is there and counters are allowed
    assert 0 < len(counters.kernels) <= 64 and counters.missing == []
    assert (counters.kernels["dram_read_bytes"] > 0).any()
    assert result.summary.gpu_us_per_forward is not None  # the profiler's own, kept apart
