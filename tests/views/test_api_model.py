"""/model through gradio_client against the served app (issue 43): named parameters, a tiny
ragged run's tables, and a bad value answered with its one-line message."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    ("change", "message"),
    [({"lengths": "32,40"}, "each of lengths must be between 1 and 32"),
     ({"preset": "../etc"}, "preset must be one of")],
)  # fmt: skip
def test_model_endpoint_refuses_bad_values_with_their_message(client, change, message):
    with pytest.raises(AppError, match=message):
        client.predict(**{**TINY, **change}, implementations=["sdpa"], api_name="/model")
