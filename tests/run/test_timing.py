"""Issue 23 without a GPU: the timing and steps parameters and their refusals, the spread of the
per-step figures, NVML absent (and a fake NVML's readings), and the memory timeline built from
the allocator snapshots recorded on the H200 (tests/fixtures/h200_memory_*.pickle.gz:
benchmarks/timing_h200.py at the post's shape, B8 H16 S1024 D64 bf16)."""

from __future__ import annotations

import gzip
import json
import pickle
import sys
import types

import pytest

from profiling.analysis import memory_timeline
from profiling.analysis.spread import large_spread_note, spread, step_spread
from profiling.run import clocks as gpu_clocks
from profiling.run import trace as run_trace
from profiling.views import timing as views_timing
from profiling.workload import request as job_request
from profiling.workload.spec import ConfigError, Workload, page_workload, shape_tag
from tests.conftest import FIXTURES, NAIVE

POST_SCORES = 8 * 16 * 1024 * 1024  # B·H·S·S at the post's shape
MIB = 1024**2


def snapshot(name: str) -> dict:
    with gzip.open(FIXTURES / f"h200_memory_{name}.pickle.gz") as fh:
        return pickle.load(fh)


# -- the parameters ----------------------------------------------------------------------------
def test_timing_defaults_to_eager_and_takes_the_three_modes():
    assert Workload().timing == "eager" and Workload().steps == 3
    for timing in ("eager", "cuda-graph", "cold-l2"):
        assert Workload.from_user(timing=timing).timing == timing
    with pytest.raises(ConfigError, match="unknown timing 'graph'; choose one of: eager, cuda-g"):
        Workload.from_user(timing="graph")
    with pytest.raises(ConfigError, match="timing must be"):
        Workload.from_user(timing=3)


@pytest.mark.parametrize(("steps", "ok"), [(1, True), (50, True), (0, False), (51, False)])
def test_steps_is_the_number_of_measured_steps_within_its_range(steps, ok):
    if ok:
        assert Workload.from_user(steps=steps).total_steps == steps + 2
    else:
        with pytest.raises(ConfigError, match="steps must be between 1 and 50"):
            Workload.from_user(steps=steps)


def test_the_page_holds_steps_to_its_range_per_device():
    small = dict(variant="naive", seq_len=256, batch=1, heads=4, head_dim=64)
    assert page_workload("cpu", **small, steps=10).steps == 10
    with pytest.raises(ConfigError, match="steps must be between 1 and 10 on this machine"):
        page_workload("cpu", **small, steps=11)
    assert page_workload("cuda", **small, steps=30).steps == 30


@pytest.mark.parametrize("timing", ["cuda-graph", "cold-l2"])
def test_gpu_timings_are_refused_on_a_cpu_everywhere(timing):
    small = dict(seq_len=256, dtype="float32", batch=1, heads=4, head_dim=64, causal=True)
    said = f"timing '{timing}' needs a CUDA GPU"
    with pytest.raises(ConfigError, match=said):
        page_workload("cpu", variant="naive", **small, timing=timing)
    with pytest.raises(ConfigError, match=said):
        job_request.compare_request(["naive"], **small, device="cpu", timing=timing)
    with pytest.raises(ConfigError, match=said):
        job_request.sweep_request(["naive"], [256], **{k: v for k, v in small.items()
                                  if k != "seq_len"}, device="cpu", timing=timing)  # fmt: skip
    from profiling.run.runner import run  # the CLI's path: the runner asks too

    with pytest.raises(ConfigError, match=said):
        run(Workload(variant="naive", device="cpu", timing=timing, **small))


def test_the_file_tag_names_a_timing_other_than_eager():
    shape = Workload().shape()
    assert not shape_tag(shape, "cuda").endswith("eager")
    assert shape_tag({**shape, "timing": "cold-l2"}, "cuda").endswith("_3steps_cold-l2")


# -- the spread --------------------------------------------------------------------------------
def test_spread_is_the_median_and_the_interquartile_range():
    figures = spread([10.0, 11.0, 12.0, 13.0, 100.0])
    assert figures["median"] == 12.0 and (figures["q1"], figures["q3"]) == (11.0, 13.0)
    assert figures["iqr_pct"] == pytest.approx(100 * 2 / 12) and figures["n"] == 5
    assert spread([]) is None and spread([float("nan")]) is None


def test_a_large_spread_is_said_and_a_tight_one_is_not():
    tight = step_spread([100, 101, 102], [50.0, 50.1, 50.2])
    assert large_spread_note(tight, "forward") is None
    wide_gpu = step_spread([100, 101, 102], [40.0, 50.0, 60.0])  # IQR 20% of the median
    note = large_spread_note(wide_gpu, "forward")
    assert note and "GPU µs/forward IQR 20% of the median" in note and "CPU" not in note
    # the host's CPU time moves by 10–40% on H200 runs: only beyond 50%, whatever the steps
    assert not step_spread([100, 110, 120, 130, 140], None)["cpu_us"]["large"]
    assert step_spread([40, 60, 100, 140, 160], None)["cpu_us"]["large"]
    assert step_spread([40, 100, 160], None)["cpu_us"]["large"]  # 3 steps too (issue 31)
    three = step_spread([1924.0, 6436.0, 393988.0], None)  # issue 31's page: IQR 3,000%+
    assert three["cpu_us"]["large"] and "CPU µs/forward IQR" in large_spread_note(three, "forward")
    assert step_spread([100.0, 900.0], None)["cpu_us"]["large"]  # two steps: said
    assert not step_spread([100.0], None)["cpu_us"]["large"]  # one step: no spread to read


def test_each_step_s_figures_give_the_headline_on_an_h200_trace():
    trace = run_trace.read(NAIVE)
    stats = trace.stats
    assert len(stats.gpu_us_each) == len(stats.cpu_us_each) == stats.forwards == 3
    assert sum(stats.gpu_us_each) / 3 == pytest.approx(stats.gpu_us)  # the total per step
    # CPU time per step is the median (issue 31): the headline and the timing block agree
    assert stats.cpu_us == pytest.approx(sorted(stats.cpu_us_each)[1])
    assert stats.cpu_us == pytest.approx(step_spread(stats.cpu_us_each, None)["cpu_us"]["median"])


# -- NVML --------------------------------------------------------------------------------------
def test_a_cpu_run_has_no_clocks_and_says_why():
    with gpu_clocks.Sampler(None) as sampler:
        pass
    assert sampler.clocks.summary() == {
        "available": False,
        "reason": "CPU run: no GPU to sample (NVML reads NVIDIA GPUs only)",
    }


def test_nvml_absent_or_not_installed_is_said(monkeypatch):
    with gpu_clocks.Sampler("00000000:01:00.0") as sampler:  # this machine has no NVML library
        pass
    assert not sampler.clocks.available and "NVML" in sampler.clocks.reason
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with gpu_clocks.Sampler("00000000:01:00.0") as sampler:
        pass
    assert sampler.clocks.reason == "nvidia-ml-py is not installed: no NVML readings"


def fake_nvml(clocks: list[int], reasons: int) -> types.SimpleNamespace:
    """An NVML whose SM clock reads `clocks` in turn (then the last), power 300 W, 50 °C."""
    readings = iter(clocks)
    last = [clocks[0]]

    def clock(handle, kind):
        if kind == "mem":
            return 3201
        last[0] = next(readings, last[0])
        return last[0]

    return types.SimpleNamespace(
        NVMLError=RuntimeError, NVML_CLOCK_SM="sm", NVML_CLOCK_MEM="mem",
        NVML_TEMPERATURE_GPU=0, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByPciBusId=lambda bus: "gpu",
        nvmlDeviceGetMaxClockInfo=lambda h, k: 1980,
        nvmlDeviceGetClockInfo=clock, nvmlDeviceGetPowerUsage=lambda h: 300_000,
        nvmlDeviceGetTemperature=lambda h, k: 50,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: reasons,
    )  # fmt: skip


def test_steady_clocks_give_no_warning(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([1980], 0x1))
    with gpu_clocks.Sampler("bus") as sampler:
        pass
    figures = sampler.clocks.summary()
    assert figures["samples"] >= 2 and figures["sm_mhz_min"] == 1980 == figures["sm_mhz_max"]
    assert figures["power_w_max"] == 300.0 and figures["temp_c_max"] == 50
    assert figures["reasons"] == ["gpu idle"] and figures["throttled"] == []
    assert figures["warning"] is None
    assert len(sampler.clocks.as_dict()["series"]) == figures["samples"]


def test_a_clock_drop_or_a_throttle_reason_is_warned_of(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([1980, 1755], 0x4 | 0x20))
    with gpu_clocks.Sampler("bus") as sampler:
        pass
    warning = sampler.clocks.summary()["warning"]
    assert "the SM clock dropped from 1980 to 1755 MHz" in warning
    assert "software power cap, software thermal slowdown" in warning


# -- the memory timeline -----------------------------------------------------------------------
# max_memory_allocated after each step on the H200 (benchmarks/timing_h200.py, 2026-12-01)
H200_PEAKS_MIB = {"naive_forward": 753.0, "naive_train": 1377.0,
                  "sdpa-flash_forward": 272.5, "sdpa-flash_train": 449.0}  # fmt: skip


@pytest.mark.parametrize("name", list(H200_PEAKS_MIB))
def test_the_timeline_peak_is_the_step_s_max_memory_allocated(name):
    timeline = memory_timeline.build(snapshot(name), POST_SCORES)
    assert timeline.peak_bytes / MIB == pytest.approx(H200_PEAKS_MIB[name], abs=0.05)
    totals = [sum(values[i] for values in timeline.series.values()) for i in range(len(timeline.x))]
    assert max(totals) == timeline.peak_bytes and timeline.x == sorted(timeline.x)
    at_peak = sum(row["MiB at peak"] for row in timeline.breakdown)
    assert at_peak == pytest.approx(timeline.peak_bytes / MIB)


def test_naive_forward_names_its_scores_probabilities_and_output():
    rows = {row["what"]: row for row in memory_timeline.build(snapshot("naive_forward"),
                                                               POST_SCORES).breakdown}  # fmt: skip
    assert list(rows) == ["before the step", "scores", "probabilities", "output"]
    # matmul, scale and masked_fill each make a B·H·S² bf16 tensor (256 MiB); softmax one more
    assert rows["scores"]["MiB allocated in the step"] == 768.0
    assert rows["probabilities"]["MiB at peak"] == 256.0
    assert rows["probabilities"]["made by"].startswith("attention/naive.py:")
    assert rows["output"]["MiB at peak"] == 16.0


def test_training_steps_name_what_autograd_saved_and_the_gradients():
    naive = {r["what"]: r for r in memory_timeline.build(snapshot("naive_train"),
                                                          POST_SCORES).breakdown}  # fmt: skip
    assert naive["saved for backward"]["MiB at peak"] == 256.0  # the probabilities
    assert naive["gradients"]["MiB allocated in the step"] == 48.0  # dq, dk, dv
    flash = {r["what"]: r for r in memory_timeline.build(snapshot("sdpa-flash_train"),
                                                          POST_SCORES).breakdown}  # fmt: skip
    assert flash["saved for backward"]["MiB at peak"] < 1  # log-sum-exp and a seed, no S²
    assert "scores" not in flash and "probabilities" not in flash
    assert flash["gradients"]["MiB at peak"] == 48.0


def test_the_figure_stacks_what_memory_is_and_marks_the_peak():
    timeline = memory_timeline.build(snapshot("naive_forward"), POST_SCORES)
    figure = views_timing.memory_figure(timeline, "naive")
    names = [trace.name for trace in figure.data]
    assert names == [*timeline.series, "peak"] and figure.data[-1].y[0] == pytest.approx(753.0)
    assert views_timing.memory_figure(None).layout.annotations[0].text.startswith("n/a")


# -- a CPU run ---------------------------------------------------------------------------------
def test_a_cpu_run_reports_its_spread_no_clocks_no_timeline_and_writes_its_figures(tmp_path):
    from profiling.run.runner import run

    small = dict(seq_len=64, dtype="float32", batch=1, heads=2, head_dim=16)
    result = run(Workload(variant="naive", device="cpu", steps=5, **small), out_dir=tmp_path)
    summary = result.summary
    assert summary.timing == "eager" and summary.step_spread["cpu_us"]["n"] == 5
    assert "gpu_us" not in summary.step_spread
    assert summary.gpu_clocks["available"] is False and summary.memory is None
    assert result.memory_snapshot is None and result.memory_timeline is None
    saved = json.loads(result.run_json.read_text())
    assert saved["summary"]["step_spread"]["cpu_us"]["n"] == 5
    assert "needs a GPU" in views_timing.memory_note(summary)


def test_memory_is_in_use_until_its_free_is_requested_not_completed():
    """The allocator's stats (and max_memory_allocated) drop at free_requested; free_completed
    comes later when another stream used the block."""
    events = [
        {"action": "alloc", "addr": 1, "size": 4096, "frames": []},
        {"action": "free_requested", "addr": 1, "size": 4096},
        {"action": "alloc", "addr": 2, "size": 4096, "frames": []},
        {"action": "free_completed", "addr": 1, "size": 4096},
    ]
    timeline = memory_timeline.build({"segments": [], "device_traces": [events]})
    assert timeline.peak_bytes == 4096


# -- the traces of a cuda-graph and a cold-l2 run (sdpa-cudnn, 10 steps, H200) -------------------
COLD, GRAPH, EAGER = (
    FIXTURES / f"h200_{name}_sdpa-cudnn_8_16_1024_64_bf16.json.gz"
    for name in ("cold-l2", "cuda-graph", "eager10")
)


def test_a_graph_replay_s_kernels_count_in_its_windows_with_no_cpu_op_inside():
    graph, eager = run_trace.read(GRAPH), run_trace.read(EAGER)
    assert graph.stats.forwards == eager.stats.forwards == 10
    assert set(graph.kernels["name"]) == set(eager.kernels["name"])  # the same cuDNN kernel
    assert graph.stats.kernels == eager.stats.kernels == 1
    assert graph.stats.gpu_us == pytest.approx(eager.stats.gpu_us, rel=0.05)
    # no aten op in a graph: its cuDNN kernel names the backend (issue 31)
    assert graph.stats.backend == eager.stats.backend == "cudnn"
    assert max(graph.stats.cpu_us_each) < min(eager.stats.cpu_us_each)


def test_the_l2_flush_is_in_no_figure_and_no_launch_statistic():
    cold = run_trace.read(COLD)
    assert not cold.kernels["name"].str.contains("FillFunctor").any()
    assert cold.stats.kernels == 1
    launch = cold.launch_stats()
    assert not launch.per_kernel["name"].str.contains("FillFunctor").any()
    assert launch.busy_pct < 60  # the flush's 256 MiB memset would read as busy: 91%
