"""On a CUDA GPU (the H200): every variant at the post's shape and at a long one, OOM recovery.

Run with `python -m pytest -m gpu`. Expectations are what seed-post.md and h200-baseline.md
say each trace should contain; a mismatch is the interesting result, not a flaky test.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from attention import VARIANTS
from benchmarks.shapes import SHAPES
from profiling.config import ConfigError, RunConfig
from profiling.runner import RunError, VariantUnavailable, run
from tests.test_small_trace import assert_paths_agree

pytestmark = pytest.mark.gpu

POST, LONG = SHAPES["post"], SHAPES["long"]
TOL = 2e-2  # bf16
# With ATTNPROF_RESULTS=dir, each run's summary and kernel table (and the post-shape traces)
# are kept there, so benchmarks/results_h200.py --from DIR renders the table from these runs.
RESULTS = os.environ.get("ATTNPROF_RESULTS")


def record(result, shape_id: str) -> None:
    if not RESULTS:
        return
    out = Path(RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    row = {"shape": shape_id, **result.summary.as_dict(),
           "kernels": result.kernels.to_dict("records")}  # fmt: skip
    with open(out / "runs.jsonl", "a") as fh:
        fh.write(json.dumps(row, default=str) + "\n")
    if shape_id == "post":
        shutil.copy(result.trace_gz, out / f"{result.summary.variant}_{result.trace_gz.name}")


def profile(variant: str, shape: dict, tmp_path):
    try:
        return run(RunConfig.from_user(variant=variant, device="cuda", **shape), out_dir=tmp_path)
    except VariantUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("shape_id", ["post", "long"])
@pytest.mark.parametrize("vid", list(VARIANTS))
def test_every_variant_on_gpu(vid, shape_id, tmp_path):
    result = profile(vid, POST if shape_id == "post" else LONG, tmp_path)
    record(result, shape_id)
    assert result.small is not None  # a run's trace takes the plain-Python path ...
    assert_paths_agree(result.trace_json)  # ... and reads exactly as the trace model reads it
    s = result.summary
    assert s.forwards == 3 and s.rel_err < TOL
    assert s.gpu_us_per_forward and s.gpu_us_per_forward > 0 and s.peak_mib > 0
    assert s.kernels_per_forward >= 1 and not result.kernels.empty
    if vid == "naive":
        assert s.memcpy_per_forward == 1  # the hidden copy of out-of-place masked_fill
    if vid == "naive-inplace":
        assert s.memcpy_per_forward == 0
    if vid == "sdpa-math":
        assert s.kernels_per_forward >= 15 and s.ran == "SDPA math"
        assert (result.kernels["category"] == "gemm").any()
    if vid in ("sdpa-efficient", "sdpa-flash", "sdpa-cudnn"):
        backend = vid.removeprefix("sdpa-")
        assert s.ran == f"SDPA {backend}" and s.kernels_per_forward == 1
        assert result.kernels.iloc[0]["category"] == "fused attention"
    if vid == "flex":
        assert (result.kernels["name"].str.contains("flex_attention")).any()
    if VARIANTS[vid].family == "kernels":
        assert s.ran  # says which source ran: Hub, LOCAL_KERNELS override or local Triton build


def test_naive_inplace_removes_the_memcpy(tmp_path):
    naive = profile("naive", POST, tmp_path).summary
    inplace = profile("naive-inplace", POST, tmp_path).summary
    assert naive.memcpy_per_forward - inplace.memcpy_per_forward == 1
    assert inplace.gpu_us_per_forward < naive.gpu_us_per_forward


def test_math_is_slower_than_naive_and_upcasts(tmp_path):
    naive = profile("naive-inplace", POST, tmp_path).summary
    math_ = profile("sdpa-math", POST, tmp_path)
    assert math_.summary.gpu_us_per_forward > naive.gpu_us_per_forward
    gemms = math_.kernels[math_.kernels["category"] == "gemm"]
    assert gemms["decoded"].str.contains("FP32|fp32").any()


def test_huge_config_refused_by_the_estimate():
    config = RunConfig.from_user(variant="naive", seq_len=65536, device="cuda", batch=8, heads=16)
    with pytest.raises(ConfigError, match=r"needs about .* reduce seq_len to"):
        run(config)


def test_free_memory_counts_the_allocators_unused_cache():
    """A GiB freed into PyTorch's cache is still free to the next run."""
    from profiling.config import available_bytes

    torch.cuda.empty_cache()
    before = available_bytes("cuda")
    block = torch.empty(1024**3, dtype=torch.uint8, device="cuda")
    del block  # back in the caching allocator, not the driver
    free, _ = torch.cuda.mem_get_info()
    cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    assert cached >= 1024**3
    assert available_bytes("cuda") == free + cached
    assert abs(available_bytes("cuda") - before) < 64 * 1024**2


def test_induced_oom_recovers(monkeypatch, tmp_path):
    torch.cuda.empty_cache()
    baseline = torch.cuda.memory_allocated()
    monkeypatch.setattr("profiling.runner.check_memory", lambda config, device: 0)
    huge = RunConfig.from_user(variant="naive", seq_len=65536, device="cuda", batch=8, heads=16)
    with pytest.raises(RunError, match="out of memory"):
        run(huge, out_dir=tmp_path)
    assert torch.cuda.memory_allocated() == baseline
    monkeypatch.undo()
    assert profile("sdpa-flash", POST, tmp_path).summary.forwards == 3
