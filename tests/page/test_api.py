"""The /profile endpoint through gradio_client against the app launched on localhost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import app
from profiling.analysis.summary import forward_spans
from profiling.trace import model as trace
from tests.conftest import PROFILE_PARAMETERS

SMALL = dict(variant="sdpa-math", seq_len=128, dtype="float32", batch=1, heads=2, head_dim=32,
             causal=True)  # fmt: skip


@pytest.fixture(scope="module")
def result(client):
    return client.predict(**SMALL, api_name="/profile")


def test_profile_endpoint_is_documented_with_named_parameters(client):
    api = client.view_api(return_format="dict", print_info=False)
    endpoints = api["named_endpoints"]
    # the lesson/relabel listeners stay private; the #4 endpoints: tests/views/test_api_views.py
    # issue 34's History endpoints come after the five (tests/store/test_store_runs.py)
    history = ["/history", "/history_run", "/history_diff", "/history_compare", "/history_trend"]
    model = ["/model", "/model_sweep"]  # issue 43's, last
    listed = ["/profile", "/compare", "/diff", "/sweep", "/analyze", *history, *model]
    assert list(endpoints) == listed
    params = [p["parameter_name"] for p in endpoints["/profile"]["parameters"]]
    assert params == PROFILE_PARAMETERS
    assert len(endpoints["/profile"]["returns"]) == 12  # with roles and the roofline (2)


def test_profile_returns_tables_plot_and_files(result):
    strip, summary, operators, kernels, note, plot, json_path, gz_path, txt_path, *why = result
    roles, roofline_plot, roofline = why
    assert roles["headers"][:2] == ["Role", "µs / step"] and "Figures from" in roofline["headers"]
    layout = json.loads(roofline_plot["plot"])["layout"]
    if roofline["data"]:  # GPU kernels placed on log axes
        assert layout["xaxis"]["type"] == "log"
    else:  # a CPU run: no kernels, and the chart says why (issue 42)
        assert layout["annotations"][0]["text"].startswith("No roofline: ")
    assert "CPU µs / forward" in strip or "GPU µs / forward" in strip
    assert summary["variant"] == "sdpa-math" and summary["forwards"] == 3
    assert operators["headers"][0] == "Operator"
    ops = {row[0]: row for row in operators["data"]}
    assert ops["attn_fwd"][1] == 3 and "aten::scaled_dot_product_attention" in ops
    assert kernels["headers"][0] == "Kernel"
    assert ("no gpu kernels" in note.lower()) == (app.DEVICE == "cpu")
    assert plot["type"] == "plotly"
    figure = json.loads(plot["plot"])
    assert figure["layout"]["xaxis"]["title"]["text"] == "µs from first profiled step"
    bars = sum(len(t["y"]) for t in figure["data"] if t["type"] == "bar")

    t = trace.load(gz_path)
    assert bars == len(t.spans)  # one bar per span of the downloaded trace
    assert Path(json_path).name.endswith(".json") and Path(txt_path).name.endswith(".txt")
    assert len(trace.load(json_path).spans) == len(t.spans)
    assert "attn_fwd" in Path(txt_path).read_text()
    # one attn_fwd per active ProfilerStep
    steps, forwards = t.steps(), forward_spans(t)
    assert len(steps) == len(forwards) == 3
    for start, end in zip(steps["start_us"], steps["end_us"], strict=True):
        inside = forwards[(forwards["start_us"] >= start) & (forwards["end_us"] <= end)]
        assert len(inside) == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(seq_len=10**9), None),  # outside the slider: refused by Gradio itself
        (dict(head_dim=60), "multiple of 8"),
        (dict(seq_len=100.5), "whole number"),  # sliders pass floats: the backend refuses
        (dict(variant="nope"), None),  # not a dropdown choice
        (dict(dtype="float64"), None),
        (dict(causal="maybe"), "causal must be true or false"),
    ],
)
def test_out_of_range_values_come_back_as_errors(client, changes, message):
    with pytest.raises(Exception) as info:  # gradio_client's AppError
        client.predict(**{**SMALL, **changes}, api_name="/profile")
    assert type(info.value).__name__ == "AppError"
    if message:
        assert message in str(info.value)


@pytest.mark.skipif(app.DEVICE != "cpu", reason="needs a machine without CUDA")
def test_unavailable_variant_is_an_error_with_the_reason(client):
    with pytest.raises(Exception, match="needs a CUDA GPU"):
        client.predict(**{**SMALL, "variant": "sdpa-cudnn", "dtype": "bfloat16"},
                       api_name="/profile")  # fmt: skip


@pytest.mark.skipif(app.DEVICE != "cpu", reason="what a CPU run's summary holds")
def test_a_cpu_runs_gpu_figures_are_null_and_the_strip_says_why(result):
    """Seen failing when the runner kept ForwardStats' 0.0 kernels/memcpy/memset on a CPU."""
    strip, summary = result[0], result[1]
    gpu_figures = ["kernels_per_forward", "memcpy_per_forward", "memset_per_forward"]
    gpu_figures += ["gpu_us_per_forward", "cpu_bound", "peak_mib"]
    assert {name: summary[name] for name in gpu_figures} == dict.fromkeys(gpu_figures)
    assert summary["cpu_us_per_forward"] > 0
    assert "CPU run: no GPU work" in strip


def test_a_train_step_through_the_api_reports_both_phases(client):
    """`mode` is the last parameter: calls without it keep today's forward (the fixture above);
    with it, the summary has each phase, the gradients' errors and the saved bytes."""
    strip, summary = client.predict(**SMALL, mode="train", api_name="/profile")[:2]
    assert summary["mode"] == "train"
    assert [phase["phase"] for phase in summary["phases"]] == ["attn_fwd", "attn_bwd"]
    assert set(summary["grad_err"]) == {"dq", "dk", "dv"} and summary["saved_extra_bytes"] > 0
    assert "CPU µs / step" in strip and "phase attn_bwd" in strip and "saved for backward" in strip
    with pytest.raises(Exception, match="unknown mode 'inference'"):
        client.predict(**SMALL, mode="inference", api_name="/profile")
