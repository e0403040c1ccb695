"""Issue 41 (mutmut): an imported row's rules (profiling/store/imported.py) at their edges and in
the words a user reads: the run's id, time, kind, status and trace fields, each field's type and
length, the shipped row and byte caps written out. Real store columns; each test was seen
failing with its mutant applied by hand."""

from __future__ import annotations

import sqlite3

import pytest

from profiling.store import open_store, query
from profiling.store.model_summary import MODEL_KINDS
from profiling.store.write import record
from tests.store.store_helpers import run_data


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "runs.sqlite")


def _columns(store, table: str = "runs"):
    from profiling.store import imported

    query.list_runs(store)  # the store's tables made
    with sqlite3.connect(store.path) as connection:
        return imported.columns_of(connection, table)


def _checked(store, **changes):
    from profiling.store import imported

    run = query.get_run(store, record(store, run_data(trace=None)).run_id)
    run.pop("summary_json")
    return imported.checked_run({**run, **changes}, _columns(store))


def _refusal(store, **changes) -> str:
    from profiling.store import imported

    with pytest.raises(imported.Refused) as refused:
        _checked(store, **changes)
    return str(refused.value)


def test_an_imported_runs_rules_at_their_edges_and_in_words(store):
    import time

    from profiling.store import imported

    assert _checked(store, id="a" * 16, origin="api", origin_space="me/x")["origin"] == "import"
    assert _checked(store, origin_space="me/x")["origin_space"] == ""
    assert _refusal(store, id="a" * 15) == (
        "id must be an id as the store makes them (16 letters, digits, '-' or '_'), not "
        "'aaaaaaaaaaaaaaa'"
    )
    assert _checked(store, created=imported.EARLIEST)["created"] == imported.EARLIEST
    assert _refusal(store, created=imported.EARLIEST - 1) == (
        "created must be seconds since 1970 between 2020-01-01 and tomorrow, not 1577836799.0"
    )
    _checked(store, created=time.time() + imported.AHEAD_S - 60)
    assert _refusal(store, created=time.time() + imported.AHEAD_S + 60).startswith("created ")
    model = {"preset": "tiny", "layers": 1}  # a model run names its preset and layers
    kinds = [
        _checked(store, kind=kind, **(model if kind in MODEL_KINDS else {}))["kind"]
        for kind in imported.KINDS
    ]
    assert kinds == list(imported.KINDS)
    assert _refusal(store, kind="exploit") == (
        "kind must be one of profile, compare, sweep, model, model-sweep, not 'exploit'"
    )
    assert _refusal(store, status="great") == (
        "status must be one of ok, unavailable, refused, failed, oom, skipped, not 'great'"
    )
    assert _checked(store, trace_hash=None, trace_bytes=None, trace_pruned=None)["id"]
    assert _refusal(store, trace_hash="/etc") == (
        "trace_hash must be 64 lowercase hex characters, not '/etc'"
    )
    assert _checked(store, trace_bytes=0, trace_pruned=1)["trace_pruned"] == 1
    assert _refusal(store, trace_bytes=-1) == "trace_bytes must be 0 or more bytes, not -1"
    assert _refusal(store, trace_pruned=2) == "trace_pruned must be 0 or 1, not 2"
    assert _refusal(store, id=None) == "id is missing"
    assert _refusal(store, status=float("nan")) == "status is missing"


def test_an_imported_fields_type_and_length_are_the_columns(store):
    import numpy as np

    from profiling.store import imported

    column = {c.name: c for c in _columns(store)}
    text, summary_json = column["reason"], imported.Column("summary_json", "TEXT", False)
    assert imported.field(text, "r" * imported.MAX_TEXT) == "r" * 65_536
    with pytest.raises(imported.Refused, match=r"^is 65,537 characters long, more than 65,536$"):
        imported.field(text, "r" * 65_537)
    assert len(imported.field(summary_json, "{" + " " * imported.MAX_TEXT + "}")) == 65_538
    with pytest.raises(imported.Refused, match=r"^must be text, not 5$"):
        imported.field(text, 5)
    whole, real = column["steps"], column["gpu_us_median"]
    assert (whole.declared, real.declared) == ("INTEGER", "REAL") and column["kind"].required
    assert not column["id"].required and not column["trace_pruned"].required  # it has a default
    assert imported.field(whole, True) == 1 and type(imported.field(whole, 3.0)) is int
    assert imported.field(whole, np.int64(2**63 - 1)) == 2**63 - 1
    with pytest.raises(imported.Refused, match=r"^must be a whole number of 64 bits, not 2\.5$"):
        imported.field(whole, 2.5)
    with pytest.raises(imported.Refused, match=r"^must be a whole number of 64 bits"):
        imported.field(whole, 2**63)
    assert type(imported.field(real, 3)) is float and imported.field(real, None) is None
    with pytest.raises(imported.Refused, match=r"^must be a finite number, not inf$"):
        imported.field(real, float("inf"))
    with pytest.raises(imported.Refused, match=r"^must be a single value, not \[1, 2\]$"):
        imported.field(real, [1, 2])
    with pytest.raises(imported.Refused, match=r"^is not a row of named fields: 5$"):
        imported.checked_child(5, _columns(store, "kernels"))


def test_a_run_with_its_child_rows_is_refused_past_its_row_and_byte_caps():
    """The shipped caps, written out: 100,000 child rows, 16 MiB (text by its length, 8 bytes
    a number)."""
    from profiling.store import imported

    row = {"phase": "attn_fwd"}
    imported.check_run_size({}, {"kernels": [row] * 60_000, "roles": [row] * 40_000})
    with pytest.raises(imported.Refused, match=r"^has 100,001 child rows, more than 100,000$"):
        imported.check_run_size({}, {"kernels": [row] * 60_000, "roles": [row] * 40_001})
    run, left = {"id": "x" * 16}, 16 * 2**20 - 16 - 8
    imported.check_run_size(run, {"kernels": [{"name": "k" * left, "count": 1}]})  # at the cap
    with pytest.raises(imported.Refused) as refused:
        imported.check_run_size(run, {"kernels": [{"name": "k" * (left + 1), "count": 1}]})
    assert str(refused.value) == "takes 16.0 MiB with its child rows, more than 16 MiB"
