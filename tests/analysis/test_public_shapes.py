"""Issue 31 on small traces shaped like the public ones it was found on
(benchmarks/gen_public_shapes.py writes them): CUDA-graph replays, GPU work without a launch
record, totals under per-forward headers, and devices read from the trace's own properties."""

from __future__ import annotations

import gzip
import json

import pytest

from benchmarks import gen_public_shapes
from profiling.analysis.analyze import analyze
from profiling.analysis.launch import launch_rows, launch_stats
from profiling.run import records as small_trace
from profiling.trace import model as trace
from profiling.views.analyze import analyze_page
from tests.conftest import H200

SHAPES = gen_public_shapes.SHAPES_DIR
GRAPH = SHAPES / "shape_cuda-graph.json.gz"


def test_fixtures_are_what_the_generator_writes(tmp_path):
    for path in gen_public_shapes.write(tmp_path):
        assert path.read_bytes() == (SHAPES / path.name).read_bytes(), path.name


def _raw(path):
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_a_graph_launch_is_counted_once():
    """Each step: 2 cudaLaunchKernel of 8 µs and one cudaGraphLaunch of 40 µs whose memset and
    4 kernels share its correlation id. Counted per launch call, not per GPU item it started."""
    stats = launch_stats(trace.load(GRAPH))
    raw = [e for e in _raw(GRAPH) if e.get("cat") == "cuda_runtime"]
    assert len(raw) == 9 and stats.launch_calls == 9
    assert stats.launches == 21  # GPU items with a launch: 6 eager + 3 × 5 from the graphs
    assert stats.cpu_launch_mean_us == pytest.approx(sum(e["dur"] for e in raw) / 9)
    assert stats.cpu_launch_max_us == 40.0
    assert stats.cpu_launch_us_per_forward == pytest.approx(8 + 8 + 40)
    rows = dict(launch_rows(stats))
    assert "56.0 µs per step" in rows["CPU launch"] and "per forward" not in rows["CPU launch"]
    assert "3 cudaGraphLaunch" in rows["CPU launch"]


def test_gpu_work_without_a_launch_record_is_said_with_its_share():
    """Step 3's second replay (4 kernels of 40 µs) has no launch in the trace: in no step's
    figures, and the summary says how much that is and why."""
    result = analyze(GRAPH)
    assert result.stats.gpu_us == pytest.approx((2 * 15 + 1 + 4 * 40) * 3 / 3)
    gpu = [e for e in _raw(GRAPH) if e.get("cat") in ("kernel", "gpu_memset")]
    share = 100 * 160 / sum(e["dur"] for e in gpu)
    assert (result.launch.unlinked, result.launch.unlinked_us) == (4, 160.0)
    text = dict(launch_rows(result.launch))["not counted"]
    assert text.startswith(f"4 GPU work items, 160.0 µs ({share:.1f}% of all GPU work)")
    assert "no launch" in text
    assert ("not counted", text) in result.summary


@pytest.mark.parametrize("name", ["a100", "cuda-graph"])
def test_totals_are_not_headed_per_forward(name):
    """No attn_fwd spans: the kernel and role tables hold whole-trace totals, so say so."""
    page = analyze_page(str(SHAPES / f"shape_{name}.json.gz"))
    headers = " ".join(list(page.kernels.columns) + list(page.roles.columns))
    assert "/ fwd" not in headers and "/ step" not in headers
    assert "Calls (whole trace)" in page.kernels.columns
    assert "µs (whole trace)" in page.kernels.columns and "µs (whole trace)" in page.roles.columns


def test_per_forward_headers_stay_where_forwards_were_counted():
    page = analyze_page(str(H200["naive"]))  # our own run: attn_fwd spans
    assert "Calls / fwd" in page.kernels.columns and "µs / fwd" in page.kernels.columns


def _rows(name):
    return analyze(SHAPES / f"shape_{name}.json.gz").summary


def test_an_amd_device_is_not_called_by_an_nvidia_compute_capability():
    """An MI250 reports computeMajor 9 like an H100: it is no sm_90."""
    device = dict(_rows("mi250"))["device 0"]
    assert device.startswith("AMD Instinct MI250X / MI250 (") and "sm_" not in device
    assert "104 CUs" in device and "64 GiB" in device
    nvidia = dict(_rows("a100"))["device 0"]
    assert nvidia == "NVIDIA A100-SXM4-40GB (sm_80, 108 SMs, 39 GiB)"


def test_an_mtia_trace_is_an_accelerator_trace_with_an_unknown_device():
    result = analyze(SHAPES / "shape_mtia.json.gz")
    rows = dict(result.summary)
    assert result.has_gpu and "CPU-only" not in " ".join(rows.values())
    assert rows["device"] == "unknown (the trace records no device properties)"
    assert "in 2 lanes (1 GPU)" in rows["events"]  # its device lane counted, whatever its label
    assert not any(lane.startswith("CPU · Stream") for lane in result.lanes)
    # its process has no label: its lane is named after its work's kind, not called a GPU
    assert result.lanes == ["CPU · thread 100 (python3)", "MTIA 0 · stream 7"]
    assert small_trace.read(SHAPES / "shape_mtia.json.gz").lanes == result.lanes
    assert result.launch.launches == 2 and result.launch.busy_us == 400.0
    assert result.stats.gpu_us == 200.0


def test_diff_says_when_the_two_traces_ran_on_different_devices(tmp_path):
    from profiling.views.diff import diff_page

    a100, v100 = SHAPES / "shape_a100.json.gz", SHAPES / "shape_v100.json.gz"
    first = diff_page(a100, v100, "A", "B").headline.splitlines()[0]
    assert first == (
        "Different devices: A ran on NVIDIA A100-SXM4-40GB, B on Tesla V100-SXM2-16GB; "
        "times differ by the hardware as well as by what ran."
    )
    same = diff_page(a100, a100, "A", "B").headline
    assert "device" not in same.lower()
    unknown = diff_page(a100, SHAPES / "shape_mtia.json.gz", "A", "B").headline.splitlines()[0]
    assert unknown.startswith("Devices may differ: A ran on NVIDIA A100-SXM4-40GB, B on unknown")


def test_a_train_runs_launch_time_is_per_step():
    """A train run's steps hold a forward and a backward: its launch time is per step."""
    from tests.conftest import FIXTURES

    stats = launch_stats(trace.load(FIXTURES / "h200_train-naive_8_16_1024_64_bf16.json.gz"))
    assert (stats.forwards, stats.unit) == (3, "step")
    assert dict(launch_rows(stats))["CPU launch"].endswith(" µs per step")


def test_api_callers_get_the_unit_the_calls_and_what_was_not_counted():
    from profiling.views.profile import launch_json

    got = launch_json(launch_stats(trace.load(GRAPH)))
    assert got["cpu_launch_us_per_forward"] == 56.0 and got["unit"] == "step"
    assert (got["launches"], got["launch_calls"]) == (21, 9)
    assert (got["unlinked"], got["unlinked_us"]) == (4, 160.0)


def test_the_launch_block_says_a_graph_calls_time_is_shared_by_its_rows():
    from profiling.views.shared import launch_html

    html = launch_html(launch_stats(trace.load(GRAPH)))
    assert "One cudaGraphLaunch call starts several GPU items" in html
    assert "One " not in launch_html(launch_stats(trace.load(H200["naive"])))
