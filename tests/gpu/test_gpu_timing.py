"""On the H200 (issue 23): the timing modes, the NVML readings and the memory timeline.

- a graph-mode run of sdpa-cudnn at the post's shape spends far less CPU per step than eager
  and runs the same kernels;
- the cold-L2 run of a memory-bound shape (a decode whose K/V fit in the L2) is slower than warm;
- the memory timeline's peak is torch.cuda.max_memory_allocated's, within 5%, for naive and
  sdpa-flash, forward and training;
- the clocks are read, and each of the post's six is captured or said uncapturable.

Run with `python -m pytest -m gpu tests/gpu/test_gpu_timing.py`.
"""

from __future__ import annotations

import pytest

from attention import VARIANTS
from benchmarks.shapes import SHAPES
from profiling.run.runner import VariantUnavailable, run
from profiling.workload.spec import Workload

pytestmark = pytest.mark.gpu
POST_SIX = [v.id for v in VARIANTS.values() if v.compare_default == "always"]
# K and V of 8 × 8 heads × 1024 keys × 128 × 2 bytes: 32 MiB together, inside the H200's L2
DECODE_IN_L2 = dict(batch=8, heads=32, kv_heads=8, q_len=1, seq_len=1024, head_dim=128)


def _run(tmp_path, **fields):
    workload = Workload.from_user(device="cuda", **fields)
    return run(workload, out_dir=tmp_path / f"{fields['variant']}-{fields.get('timing', 'e')}")


def _median(result, figure: str) -> float:
    return result.summary.step_spread[figure]["median"]


def test_graph_mode_moves_cudnn_launch_cost_off_the_cpu(tmp_path):
    shape = dict(variant="sdpa-cudnn", steps=10, **SHAPES["post"])
    eager = _run(tmp_path, **shape)
    graph = _run(tmp_path, timing="cuda-graph", **shape)
    assert graph.summary.timing == "cuda-graph"
    assert _median(graph, "cpu_us") < 0.5 * _median(eager, "cpu_us"), (
        graph.summary.step_spread,
        eager.summary.step_spread,
    )
    assert set(graph.kernels["name"]) == set(eager.kernels["name"])
    assert graph.summary.kernels_per_forward == eager.summary.kernels_per_forward
    compared = graph.summary.launch_compare
    assert compared["cuda-graph"]["host_us"]["median"] < compared["eager"]["host_us"]["median"]
    assert graph.summary.rel_err < 2e-2


def test_cold_l2_is_slower_than_warm_on_a_memory_bound_shape(tmp_path):
    shape = dict(variant="sdpa-flash", steps=20, **DECODE_IN_L2)
    warm = _run(tmp_path, **shape)
    cold = _run(tmp_path, timing="cold-l2", **shape)
    assert _median(cold, "gpu_us") > 1.05 * _median(warm, "gpu_us"), (
        cold.summary.step_spread,
        warm.summary.step_spread,
    )
    # the flush ran, and no figure counts it: the kernels per step are the warm run's
    assert cold.summary.kernels_per_forward == warm.summary.kernels_per_forward
    assert not cold.kernels["name"].str.contains("fill|zero", case=False).any()


@pytest.mark.parametrize("mode", ["forward", "train"])
@pytest.mark.parametrize("variant", ["naive", "sdpa-flash"])
def test_memory_timeline_peak_is_max_memory_allocated(variant, mode, tmp_path):
    result = _run(tmp_path, variant=variant, mode=mode, **SHAPES["post"])
    memory = result.summary.memory
    assert memory["peak_mib"] == pytest.approx(memory["max_memory_allocated_mib"], rel=0.05)
    assert result.memory_snapshot is not None and result.memory_snapshot.stat().st_size > 0
    names = {row["what"] for row in memory["breakdown"]}
    if variant == "naive":
        assert {"scores", "probabilities"} & names or "saved for backward" in names, names
    if mode == "train":
        assert {"saved for backward", "gradients"} <= names, names


def test_clocks_are_sampled_during_the_steps(tmp_path):
    result = _run(tmp_path, variant="naive", steps=10, **SHAPES["post"])
    clocks = result.summary.gpu_clocks
    assert clocks["available"], clocks
    assert clocks["samples"] >= 2 and clocks["sm_mhz_min"] > 0 and clocks["mem_mhz_max"] > 0
    assert result.run_json is not None and "clock_samples" in result.run_json.read_text()


@pytest.mark.parametrize("mode", ["forward", "train"])
@pytest.mark.parametrize("variant", POST_SIX)
def test_each_of_the_post_six_is_captured_or_refused_with_a_reason(variant, mode, tmp_path):
    try:
        result = _run(tmp_path, variant=variant, mode=mode, timing="cuda-graph", **SHAPES["post"])
    except VariantUnavailable as exc:
        assert "CUDA graph" in str(exc) or "backward" in str(exc), exc
        return
    summary = result.summary
    assert summary.forwards == 3 and summary.rel_err < 2e-2
    assert summary.gpu_us_per_forward > 0 and summary.kernels_per_forward >= 1
    if mode == "train":
        assert max(summary.grad_err.values()) < 3e-2, summary.grad_err
        assert [row["phase"] for row in summary.phases] == ["attn_fwd", "attn_bwd"]
