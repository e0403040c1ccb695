"""On a CUDA GPU (the H200): every variant at the post's shape and at a long one, OOM recovery.

Run with `python -m pytest -m gpu`. Expectations are what seed-post.md and h200-baseline.md
say each trace should contain; a mismatch is the interesting result, not a flaky test. Every
variant runs on the H200: one that is unavailable or fails there fails its test (no skips).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from attention import VARIANTS, hub
from benchmarks.shapes import SHAPES
from profiling.run.reference import check as reference_check
from profiling.run.runner import RunError, run
from profiling.workload.memory import LIBRARY_WORKSPACE, REFERENCE_CHUNK, estimate_bytes
from profiling.workload.spec import ConfigError, Workload
from tests.run.test_small_trace import assert_paths_agree

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
    """One run; VariantUnavailable or RunError fails the test: each variant runs on the H200."""
    return run(Workload.from_user(variant=variant, device="cuda", **shape), out_dir=tmp_path)


# Memory: the whole run's peak (warm-up, profiled steps, reference check) against the estimate.
# The estimate's known slack over that peak: naive counts three score matrices where the run
# holds two at once (1.5×); compiled-naive two where Inductor's fused softmax holds one (2×);
# sdpa-math three FP32 ones where the run peaks near 2.5 (1.3×). Anything else is estimated by
# its reference phase, counted exactly, or io/4 of slack: 1.25×. Plus the workspace allowance,
# which a run need not allocate when an earlier one left cuBLAS's allocated.
SLACK = {"naive": 1.5, "compiled-naive": 2.0, "sdpa-math": 1.3}
SLACK_DEFAULT, SLACK_BYTES = 1.25, LIBRARY_WORKSPACE


def whole_run_peak(monkeypatch, config: Workload, tmp_path):
    """run(config) and the bytes its whole run added at peak. The runner resets the peak
    after warm-up (for the profiled steps' figure): the peak up to each reset is kept."""
    peaks: list[int] = []
    reset = torch.cuda.reset_peak_memory_stats

    def keep_then_reset(*args, **kwargs) -> None:
        peaks.append(torch.cuda.max_memory_allocated())
        reset(*args, **kwargs)

    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    reset()
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", keep_then_reset)
    result = run(config, out_dir=tmp_path)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset)
    return result, max([*peaks, torch.cuda.max_memory_allocated()]) - baseline


@pytest.mark.parametrize("shape_id", ["post", "long"])
@pytest.mark.parametrize("vid", list(VARIANTS))
def test_every_variant_on_gpu(vid, shape_id, tmp_path, monkeypatch):
    config = Workload.from_user(variant=vid, device="cuda", **SHAPES[shape_id])
    # the reference check at its smallest chunk, the one the estimate counts (a larger one is
    # paid from the spare memory the check leaves over)
    monkeypatch.setattr(
        reference_check, "REFERENCE_CHUNK", (REFERENCE_CHUNK[0], REFERENCE_CHUNK[0])
    )
    result, peak = whole_run_peak(monkeypatch, config, tmp_path)
    record(result, shape_id)
    assert result.trace.reader == "records"  # a run's trace takes the plain-Python path ...
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
    if vid.startswith("kernels-"):  # loaded through the `kernels` package
        assert_hub_source(vid, s, result.kernels, SHAPES[shape_id])
    assert_estimate_holds(config, s.ran, peak)


def assert_estimate_holds(config: Workload, ran: str, peak: int) -> None:
    """The whole run fits the estimate, and the estimate is no looser than its known slack."""
    estimate = estimate_bytes(config)
    # sdpa-auto is estimated as the math backend it may pick; held to the one it picked
    if config.variant == "sdpa-auto":
        closest = estimate_bytes(config.with_(variant=f"sdpa-{ran.removeprefix('SDPA ')}"))
    else:
        closest = estimate
    mib = f"peak {peak / 2**20:.0f} MiB, estimate {estimate / 2**20:.0f} ({closest / 2**20:.0f})"
    assert peak <= estimate, mib
    assert closest <= SLACK.get(config.variant, SLACK_DEFAULT) * peak + SLACK_BYTES, mib


HUB_VERSION = {"kernels-flash-attn2": ("kernels-community/flash-attn2", 3),
               "kernels-flash-attn3": ("kernels-community/flash-attn3", 1)}  # fmt: skip
TRITON_SOURCE = hub.LOCAL_BUILD / "build" / "torch-universal" / "flash_fwd.py"
TRITON_KERNEL = "_flash_fwd_kernel"  # the @triton.jit function in TRITON_SOURCE


def routed_forward_kernel(shape: dict) -> str:
    """The forward kernel the bundled build's default route takes at a shape on this GPU:
    the warp-specialised Gluon one at long head-dim-128 shapes on sm_90 (issue 44, step 12),
    else the TMA one where it won, else TRITON_KERNEL (flash_fwd's own rules, asked)."""
    from tests.attention.test_flash_triton import load_by_path

    fwd = load_by_path().flash_fwd
    b, s, h, d = (int(shape[n]) for n in ("batch", "seq_len", "heads", "head_dim"))
    q = torch.empty(b, s, h, d, dtype=getattr(torch, str(shape["dtype"])), device="cuda")
    if fwd._takes_gluon_ws(q, q, q, windowed=False):
        return "_flash_fwd_ws_kernel"
    meta = {"PACK_GQA": False, "OVERLAP": False}
    return "_flash_fwd_tma_kernel" if fwd._takes_tma(meta, q, q, q, False) else TRITON_KERNEL


def source_notes(summary) -> list[str]:
    """The notes on where a kernel came from; a measurement's own notes (a throttled clock,
    a wide spread: issue 23) may come beside them on a busy or power-capped GPU."""
    return [note for note in summary.notes if note.startswith("Hub ")]


def assert_hub_source(vid: str, s, kernels, shape: dict) -> None:
    """Which source ran, and why: the H200 cannot reach the Hub, so the Hub variants run the
    bundled Triton build with the Hub's failure as their note (attention/hub.py)."""
    assert not os.environ.get("LOCAL_KERNELS"), "this test expects no LOCAL_KERNELS override"
    assert f"def {TRITON_KERNEL}(" in TRITON_SOURCE.read_text()
    if vid == "kernels-local-triton":
        assert s.ran == hub.LOCAL_BUILD_LABEL and source_notes(s) == []
    elif hub.hub_reachable():  # another machine, online: the Hub's own build ran
        repo, version = HUB_VERSION[vid]
        assert s.ran == f"Hub {repo} v{version}" and source_notes(s) == []
        return
    else:
        repo, version = HUB_VERSION[vid]
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        why = (
            "HF_HUB_OFFLINE is set and this version of the kernel is not in the local cache"
            if offline
            else "the Hugging Face Hub is unreachable from this machine"
        )
        assert s.ran == hub.LOCAL_BUILD_LABEL  # "local Triton build (attention/flash_triton)"
        assert source_notes(s) == [f"Hub {repo} v{version}: {why}"]
    expected = routed_forward_kernel(shape)
    assert s.dominant_kernel == expected
    assert set(kernels["name"]) == {expected}


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
    config = Workload.from_user(variant="naive", seq_len=65536, device="cuda", batch=8, heads=16)
    with pytest.raises(ConfigError, match=r"needs about .* reduce seq_len to"):
        run(config)


def test_free_memory_counts_the_allocators_unused_cache():
    """A GiB freed into PyTorch's cache is still free to the next run."""
    from profiling.workload.memory import available_bytes

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
    monkeypatch.setattr("profiling.run.runner.check_memory", lambda config, device: 0)
    huge = Workload.from_user(variant="naive", seq_len=65536, device="cuda", batch=8, heads=16)
    with pytest.raises(RunError, match="out of memory"):
        run(huge, out_dir=tmp_path)
    assert torch.cuda.memory_allocated() == baseline
    monkeypatch.undo()
    assert profile("sdpa-flash", POST, tmp_path).summary.forwards == 3
