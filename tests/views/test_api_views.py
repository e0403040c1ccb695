"""The /compare, /diff, /sweep and /analyze endpoints through gradio_client on localhost."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from gradio_client import handle_file

import app
from profiling.views import compare as views_compare
from tests.conftest import FIXTURES, NAIVE, SHAPE_PARAMETERS

SHAPE = dict(dtype="float32", batch=1, heads=2, head_dim=32, causal=True)
INPLACE = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"
PARAMETERS = {
    "/compare": ["variants", "seq_len", *SHAPE_PARAMETERS, "counters"],
    "/diff": ["trace_a", "trace_b", "label_a", "label_b"],
    "/sweep": ["variants", "seq_lens", *SHAPE_PARAMETERS],
    "/analyze": ["trace", "window_start_us", "window_end_us"],
}
RETURNS = {"/compare": 7, "/diff": 4, "/sweep": 4, "/analyze": 8}  # with roles and roofline


def plot(value: dict) -> dict:
    assert value["type"] == "plotly"
    return json.loads(value["plot"])


def test_endpoints_are_documented_with_named_parameters(client):
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    for name, params in PARAMETERS.items():
        assert [p["parameter_name"] for p in endpoints[name]["parameters"]] == params
        assert len(endpoints[name]["returns"]) == RETURNS[name]  # the Diff state stays private
    diff_params = endpoints["/diff"]["parameters"]
    optional = {p["parameter_name"]: p["parameter_has_default"] for p in diff_params}
    assert optional == {"trace_a": False, "trace_b": False, "label_a": True, "label_b": True}
    assert "/diff_runs" not in endpoints
    unnamed = {  # issue 31: Gradio names an output without a label "value_39"
        (name, ret["label"])
        for name, endpoint in endpoints.items()
        for ret in endpoint["returns"]
        if re.fullmatch(r"value_\d+", ret["label"] or "value_0")
    }
    assert not unnamed


def test_compare(client):
    glance, note, bars, gantts, zip_path, roles, roofline = client.predict(
        variants=["naive", "sdpa-cudnn"], seq_len=128, **SHAPE, api_name="/compare"
    )
    assert roles["headers"][:1] == ["variant"]
    layout = plot(roofline)["layout"]
    if app.DEVICE == "cpu":  # no GPU kernels: the chart says why, with no axes (issue 42)
        assert layout["annotations"][0]["text"].startswith("No roofline: ")
    else:
        assert layout["xaxis"]["type"] == "log"
    assert glance["headers"] == views_compare.glance_columns(app.DEVICE)
    rows = {row[0]: dict(zip(glance["headers"], row, strict=True)) for row in glance["data"]}
    assert rows["naive"]["status"] == "ok" and rows["naive"]["CPU µs/fwd"] > 0
    if app.DEVICE == "cpu":
        assert rows["sdpa-cudnn"]["status"] == "unavailable"
        assert "needs a CUDA GPU" in rows["sdpa-cudnn"]["reason"]
        assert rows["sdpa-cudnn"]["CPU µs/fwd"] is None  # not run: no number, not a zero
        assert "no datasheet peak for this device" in note
    assert plot(bars)["data"][-1]["x"] == ["naive"]
    assert "Timelines" in plot(gantts)["layout"]["title"]["text"]
    with zipfile.ZipFile(zip_path) as zf:
        names = zf.namelist()
    assert "glance.csv" in names and any(n.startswith("naive/") for n in names)


def test_diff_of_two_uploads(client):
    headline, kernels, operators, roles = client.predict(
        trace_a=handle_file(NAIVE), trace_b=handle_file(INPLACE), api_name="/diff"
    )
    assert headline.startswith("B has 1 fewer Memcpy DtoD per forward (−126.5 µs)")
    by_role = {row[0]: dict(zip(roles["headers"], row, strict=True)) for row in roles["data"]}
    assert by_role["copy"]["Δ µs (B − A)"] == -126.5  # the masked_fill clone, aligned by role
    rows = {row[0]: dict(zip(kernels["headers"], row, strict=True)) for row in kernels["data"]}
    memcpy = rows["Memcpy DtoD"]
    assert (memcpy["count A"], memcpy["count B"], memcpy["Δ total µs (B − A)"]) == (1, 0, -126.5)
    assert operators["headers"][:2] == ["operator", "where"]
    _, kernels, _, _ = client.predict(
        trace_a=handle_file(NAIVE), trace_b=handle_file(INPLACE), label_a="naive",
        label_b="in-place", api_name="/diff",
    )  # fmt: skip
    assert "count in-place" in kernels["headers"]


def test_diff_headline_is_plain_text(client):
    """/diff's headline is plain text, as the CLI prints it (the page renders its own escaped
    Markdown of it): names and labels arrive as written, not as `sm80\\_xmma` or `copy\\_`."""
    math = FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
    headline, kernels, operators, _ = client.predict(
        trace_a=handle_file(NAIVE), trace_b=handle_file(math), label_a="naive_bf16",
        label_b="sdpa_math", api_name="/diff",
    )  # fmt: skip
    assert "the largest change: 1 more sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_" in headline
    assert headline.endswith(
        "\n\nCounted over: naive_bf16, 3 attn_fwd spans; sdpa_math, 3 attn_fwd spans."
    )
    assert "\\" not in headline and "&lt;" not in headline
    # the tables gained the spread and what each change is, after the columns they had
    assert kernels["headers"][-3:] == ["name", "spread µs", "change"]
    assert operators["headers"][-4:-3] == ["Δ self µs (sdpa_math − naive_bf16)"]
    assert operators["headers"][-3:] == ["spread µs", "self spread µs", "change"]


def test_readme_diff_example_runs_as_written(client, monkeypatch, capsys):
    """The README's /diff example, run as a reader runs it (from the repository's root): its
    traces exist, and it prints what its comment says."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("headline, kernel_deltas, operator_deltas, role_deltas = client.predict(")
    end = readme.index("\n", readme.index("print(headline)", start))
    example = readme[start:end]
    said = example.rsplit("# ", 1)[1].removesuffix("...").strip()
    monkeypatch.chdir(FIXTURES.parents[1])
    exec(example, {"client": client, "handle_file": handle_file})  # the README's code, as written
    printed = capsys.readouterr().out
    assert printed.startswith(said) and "in-place has 1 fewer Memcpy DtoD" in said


def test_sweep(client):
    time_plot, memory_plot, table, zip_path = client.predict(
        variants=["naive"], seq_lens=[512, 256], **SHAPE, api_name="/sweep"
    )
    rows = [dict(zip(table["headers"], row, strict=True)) for row in table["data"]]
    assert [(r["seq_len"], r["status"]) for r in rows] == [(256, "ok"), (512, "ok")]
    figure = plot(time_plot)
    assert figure["layout"]["xaxis"]["type"] == "log" and figure["layout"]["yaxis"]["type"] == "log"
    assert plot(memory_plot)["layout"]["yaxis"]["type"] == "log"
    with zipfile.ZipFile(zip_path) as zf:
        assert sum(n.endswith(".json.gz") for n in zf.namelist()) == 2  # one trace per point


def test_analyze(client):
    summary, launch, operators, kernels, gantt, roles, roofline_plot, roofline = client.predict(
        trace=handle_file(NAIVE), api_name="/analyze"
    )
    assert {row[0] for row in roles["data"]} >= {"QKᵀ", "PV", "mask", "softmax"}
    assert any(row[7].startswith("not placed") for row in roofline["data"])  # no shapes
    assert plot(roofline_plot)["layout"]["yaxis"]["type"] == "log"
    assert "NVIDIA H200" in summary and "GPU busy" in launch
    assert operators["headers"][0] == "Operator" and len(kernels["data"]) == 7
    bars = sum(len(t["y"]) for t in plot(gantt)["data"] if t["type"] == "bar")
    assert bars == 171  # one bar per span of the uploaded trace


@pytest.mark.parametrize(
    ("endpoint", "args", "message"),
    [
        ("/compare", dict(variants="naive", seq_len=128, **SHAPE), "list of variant ids"),
        ("/compare", dict(variants=["naive"], seq_len=10**9, **SHAPE), None),  # slider
        ("/compare", dict(variants=["nope"], seq_len=128, **SHAPE), None),  # not a choice
        ("/compare", dict(variants=["naive"], seq_len=128.5, **SHAPE), "whole number"),
        ("/compare", dict(variants=["naive"] * 65, seq_len=128, **SHAPE), "at most 64 entries"),
        ("/sweep", dict(variants=["naive"], seq_lens=[100], **SHAPE), None),  # not a choice
        ("/sweep", dict(variants=["naive"], seq_lens=[], **SHAPE), "at least one sequence length"),
        ("/sweep", dict(variants=["naive"], seq_lens=[256], **{**SHAPE, "head_dim": 60}),
         "multiple of 8"),
    ],
)  # fmt: skip
def test_out_of_range_values_come_back_as_errors(client, endpoint, args, message):
    with pytest.raises(Exception) as info:  # gradio_client's AppError
        client.predict(**args, api_name=endpoint)
    assert type(info.value).__name__ == "AppError"
    if message:
        assert message in str(info.value)


def test_bad_uploads_come_back_as_errors(client, tmp_path):
    not_a_trace = tmp_path / "not-a-trace.json"
    not_a_trace.write_text('{"schemaVersion": 1}')
    with pytest.raises(Exception, match="trace B: JSON is not a Chrome trace"):
        client.predict(
            trace_a=handle_file(NAIVE), trace_b=handle_file(not_a_trace), api_name="/diff"
        )
    with pytest.raises(Exception, match="upload trace B"):
        client.predict(trace_a=handle_file(NAIVE), trace_b=None, api_name="/diff")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(Exception, match="Invalid file type"):
        client.predict(trace=handle_file(text), api_name="/analyze")
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(Exception, match="not valid JSON"):
        client.predict(trace=handle_file(garbage), api_name="/analyze")


def test_private_diff_of_compare_runs_is_not_an_endpoint(client):
    with pytest.raises(ValueError):
        client.predict("naive", "naive", {"naive": str(Path("/etc/passwd"))}, api_name="/diff_runs")


def test_analyze_window_parameters_are_optional(client):
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    optional = {p["parameter_name"]: p["parameter_has_default"]
                for p in endpoints["/analyze"]["parameters"]}  # fmt: skip
    assert optional == {"trace": False, "window_start_us": True, "window_end_us": True}
