"""Issue 36 on the views: the kernel table's measured columns, the roofline's measured points
linked to the modelled ones, the block that says what ncu did (or why not), the CLI's text,
and a CPU run asked for counters through the page's handler, refused in words."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from profiling.analysis.counters import Counters, read_report
from profiling.analysis.roofline_runs import run_roofline
from profiling.run import counters as collect
from profiling.run import trace as run_trace
from profiling.views import counters as views_counters
from profiling.views.roofline_figure import LINK_NAME, MEASURED_NAME, roofline_spec
from profiling.workload.spec import Workload
from tests.conftest import CUDNN, FIXTURES

REPORT = FIXTURES / "sdpa_cudnn_8_16_1024_64_bf16.ncu-rep"
POST = dict(batch=8, heads=16, seq_len=1024, head_dim=64, dtype="bfloat16", device="cpu")


def cudnn_result(counters: Counters | None) -> SimpleNamespace:
    """What the views read of a ProfileResult: the H200's cuDNN run and its counter pass."""
    workload = Workload.from_user(variant="sdpa-cudnn", counters=True, **POST)
    read = run_trace.read(CUDNN)
    summary = SimpleNamespace(device_name="NVIDIA H200", mode="forward",
                              phases=workload.phases, config=workload.as_dict())  # fmt: skip
    return SimpleNamespace(trace=read, kernels=read.kernels, config=workload, summary=summary,
                           counters=counters)  # fmt: skip


def measured_counters() -> Counters:
    counters = read_report(REPORT)
    counters.seconds, counters.how = 14.9, collect.HOW
    return counters


def test_the_kernel_table_shows_what_ncu_measured_beside_the_profile():
    result = cudnn_result(measured_counters())
    table = views_counters.kernel_table(result, views_counters.joined(result))
    fused = table[table["Kernel"].str.startswith("cudnn_generated")].iloc[0]
    assert fused["DRAM read (B, ncu)"] == 50_355_712
    assert fused["DRAM written (B, ncu)"] == 8_831_744
    assert fused["ncu µs (replayed)"] == pytest.approx(57.8)
    assert fused["µs / fwd"] == pytest.approx(57.4)  # the profiler's own, kept apart
    header = "Occupancy % (achieved where ncu measured, else est.)"
    assert fused[header] == pytest.approx(14.1)  # CUPTI made no estimate; ncu measured it
    memset = table[table["Kernel"] == "Memset"].iloc[0]
    assert memset[["DRAM read (B, ncu)", "L2 hit % (ncu)"]].isna().all()


def test_the_roofline_links_each_measured_point_to_its_modelled_one():
    result = cudnn_result(measured_counters())
    counted = views_counters.joined(result)
    rows = views_counters.roofline_rows(run_roofline(result), counted)
    figure = roofline_spec(rows, "NVIDIA H200", "bfloat16", own_run=True)
    traces = {trace["name"]: trace for trace in figure.data}
    fused = rows[rows["name"].str.startswith("cudnn_generated")].iloc[0]
    measured, link = traces[MEASURED_NAME], traces[LINK_NAME]
    assert measured["x"] == [pytest.approx(fused["flop_per_call"] / (50_355_712 + 8_831_744))]
    assert measured["y"] == [pytest.approx(fused["tflops"])]  # same FLOPs and time: same height
    assert link["x"] == [fused["intensity"], fused["measured_intensity"], None]
    assert link["y"] == [fused["tflops"], fused["tflops"], None]
    assert "measured 59.2 MB (read 50.4 MB, written 8.8 MB)" in measured["text"][0]
    table = views_counters.roofline_table(rows.iloc[:0], rows)
    assert "Modelled vs measured" in table and "DRAM bytes / call (ncu)" in table
    # without counters the chart has no measured trace
    plain = roofline_spec(run_roofline(result), "NVIDIA H200", "bfloat16", own_run=True)
    assert MEASURED_NAME not in {trace["name"] for trace in plain.data}


def test_the_block_says_how_long_what_ncu_did_and_the_match():
    counted = views_counters.joined(cudnn_result(measured_counters()))
    block = views_counters.counters_html(counted)
    assert "the counter pass took 14.9 s" in block
    assert "DRAM per step: 50.4 MB read, 8.8 MB written" in block
    assert "caches flushed" in block and "--clock-control none" in block
    assert "1 of the profiled step&#x27;s 1 matched" in block
    said = views_counters.counters_json(counted)
    assert said["measured"] and said["dram_read_bytes"] == 50_355_712
    assert said["kernels"][0]["dram_read_bytes"] == 50_355_712
    json.dumps(said)  # the API's JSON


def test_no_counters_are_said_with_the_reason_and_no_figures():
    result = cudnn_result(Counters(reason=collect.HOW_TO_ALLOW))
    counted = views_counters.joined(result)
    assert views_counters.counters_lines(counted) == [f"no counters: {collect.HOW_TO_ALLOW}"]
    said = views_counters.counters_json(counted)
    assert said["dram_read_bytes"] is None and said["kernels"] == []
    assert views_counters.joined(cudnn_result(None)) is None  # not asked for: nothing said


def test_the_cli_prints_ncus_figures_per_kernel():
    text = views_counters.counters_text(cudnn_result(measured_counters()))
    assert text.startswith("Hardware counters (Nsight Compute):")
    assert "cudnn_generated_fort_native_sdpa_sm90_flash" in text and "50.4" in text


def test_a_cpu_run_asked_for_counters_says_why_not():
    from profiling.page import profile_tab
    from tests.conftest import RecordingProgress

    outputs = profile_tab.profile("naive", 128, "float32", 1, 2, 32, True, counters=True,
                                  progress=RecordingProgress())  # fmt: skip
    strip, summary = outputs[0], outputs[1]
    assert summary["counters"]["reason"] == collect.ON_CPU
    assert summary["counters"]["kernels"] == [] and summary["config"]["counters"] is True
    assert "No counters" in strip or "no counters" in strip


def test_compare_shows_each_variants_measured_bytes_or_why_not():
    from profiling.jobs.compare import VariantRun, glance_table
    from profiling.views.compare import glance_view

    summary = SimpleNamespace(**{name: None for name in (
        "kernels_per_forward", "gpu_us_per_forward", "cpu_us_per_forward", "peak_mib", "tflops",
        "tbps", "pct_peak_bandwidth", "roofline_bound", "rel_err", "ran", "dominant_kernel",
        "dominant_decoded")}, notes=[], mode="forward")  # fmt: skip
    runs = [
        VariantRun("sdpa-cudnn", "cuDNN", "ok", summary=summary, counters=measured_counters()),
        VariantRun(
            "naive", "naive", "ok", summary=summary, counters=Counters(reason=collect.NO_NCU)
        ),
    ]
    shown = glance_view(glance_table(runs, "NVIDIA H200", "bfloat16"), "cuda").set_index("variant")
    assert shown.loc["sdpa-cudnn", "DRAM MB read (ncu)"] == 50.4
    assert shown.loc["sdpa-cudnn", "DRAM MB written (ncu)"] == 8.8
    assert shown.loc["sdpa-cudnn", "counters"] == "measured (15 s under ncu)"
    assert pd.isna(shown.loc["naive", "DRAM MB read (ncu)"])
    assert shown.loc["naive", "counters"] == collect.NO_NCU
    plain = glance_table([VariantRun("naive", "naive", "ok", summary=summary)], "NVIDIA H200",
                         "bfloat16")  # fmt: skip
    assert "counters" not in plain  # not asked for: no columns


def test_the_h200_checks_pass_on_the_h200_report_and_fail_on_a_wrong_one():
    from benchmarks.counters_h200 import qkv_check, ran_or_said

    result = cudnn_result(measured_counters())
    ok, said = qkv_check(result)
    assert ok and said == "cuDNN fused forward DRAM read 50.4 MB vs Q+K+V 50.3 MB"
    assert ran_or_said(result)[0]
    doubled = measured_counters()
    doubled.kernels["dram_read_bytes"] *= 2  # a kernel that read Q, K and V twice
    assert not qkv_check(cudnn_result(doubled))[0]
    assert ran_or_said(cudnn_result(Counters(reason=collect.NO_NCU))) == (
        True,
        f"no counters: {collect.NO_NCU}",
    )


def test_the_cli_with_counters_on_a_cpu_prints_why_not(tmp_path, capsys):
    from tests.cli.test_cli import TINY, _run

    rc, stdout, err = _run(["--variant", "naive", *TINY, "--counters", "--out", str(tmp_path)],
                           capsys)  # fmt: skip
    assert rc == 0, err
    assert f"Hardware counters (Nsight Compute):\n  no counters: {collect.ON_CPU}" in stdout
    rc, stdout, _ = _run(["--variant", "naive", *TINY, "--out", str(tmp_path)], capsys)
    assert rc == 0 and "Hardware counters" not in stdout  # not asked for: not said
