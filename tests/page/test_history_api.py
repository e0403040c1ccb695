"""The API over HTTP (gradio_client on the served app): every endpoint whose parameters all have
defaults answers a bare call (issue 40: /history refused one), and History's messages through
the API (issue 42, item 2; issue 40: escaped ids, the store by its file name only)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

from profiling.page import profile_tab

SMALL = dict(seq_len=128, dtype="float32", batch=1, heads=2, head_dim=16, causal=True)
REQUIRED = "No value provided for required argument"


def _endpoints(client) -> dict[str, list[dict]]:
    api = client.view_api(return_format="dict", print_info=False)
    return {name: info["parameters"] for name, info in api["named_endpoints"].items()}


def test_every_endpoint_with_all_defaults_answers_a_bare_call(client):
    """Enumerated from the app's own API description, not listed by hand: a new endpoint is
    checked too. Each with a default for every parameter is called with no arguments and must
    answer (its defaults: /profile, /compare and /sweep run small CPU jobs)."""
    endpoints = _endpoints(client)
    bare = [name for name, params in endpoints.items() if all(
        p["parameter_has_default"] for p in params)]  # fmt: skip
    assert "/history" in bare and "/profile" in bare  # the enumeration found them
    answered = {}
    for name in bare:
        try:
            answered[name] = client.predict(api_name=name)
        except (TypeError, ValueError, AppError) as error:
            assert REQUIRED not in str(error), f"{name}: {error}"
            raise
    runs, note = answered["/history"]
    assert "stored runs match" in note and runs["headers"][0] == "Run"


def test_history_messages_through_the_api(client):
    first = profile_tab.profile("naive", **SMALL, progress=lambda *a, **k: None)[1]["run_id"]
    second = profile_tab.profile("naive", **SMALL, progress=lambda *a, **k: None)[1]["run_id"]
    picked = f"{first} {second}"
    with pytest.raises(AppError, match=r"^pick one run to open \(got 2\)$"):
        client.predict(run_id=picked, api_name="/history_run")
    with pytest.raises(AppError, match=r"^pick one run to draw its workload's trend \(got 2\)$"):
        client.predict(run_id=picked, api_name="/history_trend")
    with pytest.raises(AppError) as error:
        client.predict(run_id="<b>bold</b>", api_name="/history_run")
    said = str(error.value)
    assert "&lt;b&gt;bold&lt;/b&gt;" in said and "<b>" not in said
    assert "is not in this run store (runs.sqlite)" in said
    assert "/" not in said.split("run store")[-1], said  # no folder of the server's
    # the trace stays tenth; a model run's four views (issue 43) come after it, empty here
    origin, *_, trace, model_table, categories, layers, why = client.predict(
        run_id=second, api_name="/history_run"
    )
    stem = f"_{second[:8]}".rstrip(".-")  # a download name never ends in "-" or "."
    assert second in origin and Path(trace).name.endswith(f"{stem}.json.gz")
    assert why == "" and all(not shown["data"] for shown in (model_table, categories, layers))
