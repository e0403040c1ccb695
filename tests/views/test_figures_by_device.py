"""Issue 35: on a mixed cluster the Sweep and Compare figures split by device, by the tables'
rule (profiling/jobs/executor.py, ran_on_texts: more than one GPU model → a `ran on` column,
host · GPU); on one GPU model they are exactly the figures of a run without Ray.

Results are built by hand with the placements a cluster would record (a view test: nothing
runs); the Compare's come from the H200 fixtures, each given a placement."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiling.jobs.compare import CompareResult, glance_table
from profiling.jobs.executor import RAN_ON, Placement
from profiling.jobs.sweep import SweepPoint, SweepResult, sweep_table
from profiling.views.compare import compare_roofline
from profiling.views.compare_figures import (
    gpu_cpu_bars,
    mini_gantts,
    sweep_memory_figure,
    sweep_time_figure,
)
from tests.jobs.test_compare import _fixture_run
from tests.views.test_why_views import fixture_result

H200_A = Placement("host-a", "NVIDIA H200", "GPU-a")
A100_B = Placement("host-b", "NVIDIA A100-SXM4-80GB", "GPU-b")
H200_B = Placement("host-b", "NVIDIA H200", "GPU-c")  # the same model on another host
ON_A, ON_B = "host-a · NVIDIA H200", "host-b · NVIDIA A100-SXM4-80GB"
SHAPE = {"batch": 8, "heads": 16, "head_dim": 64, "dtype": "bfloat16", "causal": True,
         "device": "cuda", "steps": 3}  # fmt: skip
SWEEP_FIGURES = [sweep_time_figure, sweep_memory_figure]


def _point(variant: str, seq_len: int, where: Placement | None, status: str = "ok") -> SweepPoint:
    scale = seq_len / 256
    if status != "ok":
        return SweepPoint(variant, seq_len, status, f"{status} here", estimate_mib=40 * scale**2,
                          placement=where)  # fmt: skip
    return SweepPoint(variant, seq_len, "ok", gpu_us=100 * scale**2, cpu_us=50 * scale,
                      peak_mib=30 * scale**2, estimate_mib=40 * scale**2, tflops=100.0,
                      placement=where)  # fmt: skip


def _sweep(places: dict[tuple[str, int], Placement | None]) -> SweepResult:
    """naive and sdpa-flash at 256–1024, flash out of memory at 2048: where each ran."""
    points = [_point(v, s, places.get((v, s))) for v in ("naive", "sdpa-flash")
              for s in (256, 512, 1024)]  # fmt: skip
    points.append(_point("sdpa-flash", 2048, places.get(("sdpa-flash", 2048)), "oom"))
    return SweepResult(SHAPE, "cuda", "NVIDIA H200", ["naive", "sdpa-flash"],
                       [256, 512, 1024, 2048], points, sweep_table(points), Path("."))  # fmt: skip


MIXED = {("naive", 256): H200_A, ("naive", 512): A100_B, ("naive", 1024): H200_A,
         ("sdpa-flash", 256): A100_B, ("sdpa-flash", 512): A100_B,
         ("sdpa-flash", 1024): A100_B, ("sdpa-flash", 2048): H200_A}  # fmt: skip


def _lines(figure) -> dict[str, list[int]]:
    """The data panel's series (not the strip of points that did not run): name → lengths."""
    return {t.name: [int(x) for x in t.x] for t in figure.data if t.yaxis in (None, "y")}


def test_sweep_time_chart_draws_a_line_per_variant_and_device():
    result = _sweep(MIXED)
    assert RAN_ON in result.table  # the table splits: so must the chart
    figure = sweep_time_figure(result)
    assert _lines(figure) == {f"naive · on {ON_A}": [256, 1024], f"naive · on {ON_B}": [512],
                              f"sdpa-flash · on {ON_B}": [256, 512, 1024]}  # fmt: skip
    traces = {t.name: t for t in figure.data}
    naive_a, naive_b = traces[f"naive · on {ON_A}"], traces[f"naive · on {ON_B}"]
    flash_b = traces[f"sdpa-flash · on {ON_B}"]
    assert naive_a.line.color == naive_b.line.color != flash_b.line.color  # a variant's colour
    assert naive_a.marker.symbol != naive_b.marker.symbol == flash_b.marker.symbol  # a device's
    assert ON_B in naive_b.hovertemplate and naive_a.legendgroup == "naive"
    oom = traces["sdpa-flash oom"]  # the strip: the device in the hover of a point that ran
    assert f"on {ON_A}: oom here" in oom.customdata[0][0]


def test_sweep_memory_chart_splits_what_was_measured_not_the_estimate():
    figure = sweep_memory_figure(_sweep(MIXED))
    lines = _lines(figure)
    assert lines[f"naive · on {ON_A} peak"] == [256, 1024]
    assert lines[f"naive · on {ON_B} peak"] == [512]
    assert lines["naive estimate"] == [256, 512, 1024]  # a formula: no device measured it
    assert not any(name.startswith("naive peak") for name in lines)


SERIAL_NAMES = {
    sweep_time_figure: ["naive", "sdpa-flash", "sdpa-flash oom"],
    sweep_memory_figure: ["naive peak", "naive estimate", "sdpa-flash peak",
                          "sdpa-flash estimate", "sdpa-flash oom"],
}  # fmt: skip


@pytest.mark.parametrize("figure", SWEEP_FIGURES)
@pytest.mark.parametrize("where", ["one host", "two hosts, one model"])
def test_sweep_charts_on_one_gpu_model_are_those_of_a_serial_sweep(figure, where):
    """One model (on one host, or on two: the table does not split those) draws what a sweep
    without Ray draws, to the byte: a series per variant, no device marker or name."""
    if where == "one host":
        places = dict.fromkeys(MIXED, H200_A)
    else:
        places = {key: H200_A if i % 2 else H200_B for i, key in enumerate(MIXED)}
    placed, serial = _sweep(places), _sweep({})
    assert RAN_ON not in placed.table
    drawn = figure(placed)
    assert drawn.to_json() == figure(serial).to_json()
    assert [t.name for t in drawn.data] == SERIAL_NAMES[figure]
    assert all(t.marker.symbol is None for t in drawn.data if t.yaxis in (None, "y"))


@pytest.fixture(scope="module")
def h200_runs():
    return [
        _fixture_run("naive", "naive_8_16_1024_64_bf16.json.gz"),
        _fixture_run("sdpa-flash", "sdpa_flash_8_16_1024_64_bf16.json.gz"),
        _fixture_run("sdpa-cudnn", "sdpa_cudnn_8_16_1024_64_bf16.json.gz"),
    ]


def _compare(runs, places: list[Placement | None]) -> CompareResult:
    runs = [replace(r, placement=p) for r, p in zip(runs, places, strict=True)]
    return CompareResult(shape={**SHAPE, "seq_len": 1024}, device="cuda",
                         device_name="NVIDIA H200", runs=runs,
                         glance=glance_table(runs, "NVIDIA H200", "bfloat16"),
                         out_dir=Path("."))  # fmt: skip


def test_compare_bars_and_timelines_group_the_variants_by_device(h200_runs):
    result = _compare(h200_runs, [H200_A, A100_B, H200_A])
    bars = gpu_cpu_bars(result)
    gpu = bars.data[0]
    assert [list(level) for level in gpu.x] == [[ON_A, ON_A, ON_B],
                                                ["naive", "sdpa-cudnn", "sdpa-flash"]]  # fmt: skip
    assert list(gpu.y) == pytest.approx([1065.05, 58.20, 95.54], abs=0.01)  # each its own
    assert list(gpu.customdata) == [f"naive · on {ON_A}", f"sdpa-cudnn · on {ON_A}",
                                    f"sdpa-flash · on {ON_B}"]  # fmt: skip
    assert "%{customdata}" in gpu.hovertemplate
    titles = [a.text for a in mini_gantts(result).layout.annotations]
    assert [t.split(" · ")[0] for t in titles] == ["naive", "sdpa-flash", "sdpa-cudnn"]
    assert titles[1].endswith(f"· on {ON_B}") and titles[0].endswith(f"· on {ON_A}")


def _roofline_runs(places: list[Placement | None]) -> SimpleNamespace:
    from profiling.analysis.roofline_runs import run_roofline
    from profiling.jobs.compare import VariantRun

    runs = []
    for (name, variant), where in zip((("naive_8_16_1024_64_bf16", "naive"),
                                       ("sdpa_flash_8_16_1024_64_bf16", "sdpa-flash")),
                                      places, strict=True):  # fmt: skip
        roofline = run_roofline(fixture_result(name, variant))
        runs.append(VariantRun(variant, variant, "ok", roofline=roofline, placement=where))
    return SimpleNamespace(runs=runs, device_name="NVIDIA H200", shape={"dtype": "bfloat16"})


def test_compare_roofline_names_the_device_of_each_variants_points():
    figure = compare_roofline(_roofline_runs([H200_A, A100_B]))
    names = [t["name"] for t in figure.data if t.get("mode") == "markers"]
    assert names == [f"naive · on {ON_A}", f"sdpa-flash · on {ON_B}"]


def test_compare_figures_on_one_gpu_model_are_those_of_a_serial_compare(h200_runs):
    placed = _compare(h200_runs, [H200_A, H200_B, H200_A])
    serial = _compare(h200_runs, [None, None, None])
    assert RAN_ON not in placed.glance
    for figure in (gpu_cpu_bars, mini_gantts):
        assert figure(placed).to_json() == figure(serial).to_json()
    bars = gpu_cpu_bars(placed).data[0]
    assert list(bars.x) == ["naive", "sdpa-flash", "sdpa-cudnn"] and bars.customdata is None
    assert not any(" · on " in a.text for a in mini_gantts(placed).layout.annotations)
    rooflines = [compare_roofline(_roofline_runs(p)) for p in ([H200_A, H200_B], [None, None])]
    assert json.loads(rooflines[0].to_json()) == json.loads(rooflines[1].to_json())
    names = [t["name"] for t in rooflines[0].data if t.get("mode") == "markers"]
    assert names == ["naive", "sdpa-flash"]
