"""/model through gradio_client against the served app (issue 43): named parameters, a tiny
ragged run's tables, and a bad value answered with its one-line message."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

TINY = dict(preset="tiny", layers=1, dtype="float32", batch=2, seq_len=32, lengths="32,20",
            mode="prefill", new_tokens=1)  # fmt: skip
PARAMETERS = ["preset", "layers", "dtype", "batch", "seq_len", "lengths", "mode", "new_tokens",
              "implementations"]  # fmt: skip


def test_model_endpoint_is_documented_and_runs_a_ragged_batch(client):
    endpoint = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/model"]
    assert [p["parameter_name"] for p in endpoint["parameters"]] == PARAMETERS
    verdict, compared, categories, layers, reasons, gantt, traces = client.predict(
        **TINY, implementations=["eager", "sdpa"], api_name="/model"
    )
    assert categories["headers"][:3] == ["implementation", "step µs", "attention"]
    assert [row[1] for row in layers["data"]] == [0, 0]  # one decoder layer, each run
    assert verdict.startswith("which attn_implementation?")
    assert [row[0] for row in compared["data"]] == ["eager", "sdpa"]
    assert "mask (2, 1, 32, 32) bool" in reasons
    assert gantt["type"] == "plotly"
    names = [Path(found).name for found in traces]  # each implementation's trace, downloaded
    assert names == [f"{name}_tiny_1L_B2_S32_ragged_float32_prefill.json.gz"
                     for name in ("eager", "sdpa")]  # fmt: skip
    assert all(b'"model_layer_0"' in gzip.decompress(Path(found).read_bytes()) for found in traces)


SWEEP = ["preset", "layers", "dtype", "batch", "seq_lens", "mode", "new_tokens",
         "implementations"]  # fmt: skip


def test_model_sweep_endpoint_is_documented_and_refuses_bad_lengths(client):
    endpoint = client.view_api(return_format="dict", print_info=False)["named_endpoints"][
        "/model_sweep"
    ]
    assert [p["parameter_name"] for p in endpoint["parameters"]] == SWEEP
    fields = {**{k: v for k, v in TINY.items() if k not in ("seq_len", "lengths")},
              "implementations": ["sdpa"]}  # fmt: skip
    with pytest.raises(AppError, match="seq_lens must be whole numbers separated by commas"):
        client.predict(**fields, seq_lens="16,x", api_name="/model_sweep")
    chart, points, zipped = client.predict(**fields, seq_lens=[16], api_name="/model_sweep")
    assert chart["type"] == "plotly" and [row[:2] for row in points["data"]] == [[16, "sdpa"]]
    assert Path(zipped).name == "model_sweep_tiny_1L_B2_float32_prefill.zip"


@pytest.mark.parametrize(
    ("change", "message"),
    [({"lengths": "32,40"}, "each of lengths must be between 1 and 32"),
     ({"preset": "../etc"}, "preset must be one of")],
)  # fmt: skip
def test_model_endpoint_refuses_bad_values_with_their_message(client, change, message):
    with pytest.raises(AppError, match=message):
        client.predict(**{**TINY, **change}, implementations=["sdpa"], api_name="/model")
