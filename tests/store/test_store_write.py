"""Recording a run past the store's caps (issue 41: write.py's survivors): what a record that
pruned says and logs, that the file goes at once, the rows' cap's 1% of slack at its bounds,
and a run id a command line cannot take for an option."""

from __future__ import annotations

import pytest

from profiling.store import open_store, query, write
from profiling.store.traces import trace_path
from profiling.store.write import record
from tests.store.store_helpers import OTHER_TRACE, TRACE, count, run_data


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "profiling.store.write"]


def test_a_record_past_the_size_cap_deletes_the_oldest_trace_at_once_and_says_so(tmp_path, caplog):
    """Room for one trace: the second run's record marks the first's pruned, deletes its file
    then and there (not at some later prune), and says it in its notes and the log."""
    room = max(TRACE.stat().st_size, OTHER_TRACE.stat().st_size) + 1
    store = open_store(tmp_path / "runs.sqlite", max_bytes=room)
    first = record(store, run_data(trace=TRACE))
    assert not first.pruned and first.notes(store.max_runs) == []
    first_hash = query.get_run(store, first.run_id)["trace_hash"]
    with caplog.at_level("WARNING", logger="profiling.store.write"):
        second = record(store, run_data(trace=OTHER_TRACE))
    said = (
        f"the run store's traces passed their size cap ({room / 1e9:.2f} GB): the 1 oldest "
        f"({TRACE.stat().st_size / 1e6:.1f} MB, of 1 runs) were deleted; those runs are kept, "
        "marked 'trace pruned'"
    )
    assert second.notes(store.max_runs) == [said] and _warnings(caplog) == [said]
    assert not trace_path(store.traces, first_hash).exists()
    kept = query.get_run(store, second.run_id)["trace_hash"]
    assert sorted(p.name for p in store.traces.iterdir()) == [f"{kept}.json.gz"]


def test_the_rows_cap_leaves_a_full_store_alone_and_past_it_deletes_one_percent_more(
    tmp_path, caplog
):
    """At 100 runs of a cap of 100 nothing goes; the 101st run takes the oldest two with it
    (1 over, and cap // 100 more, so a full store prunes once in a hundred clicks)."""
    store = open_store(tmp_path / "runs.sqlite", max_runs=100)
    ids = [record(store, run_data(trace=None)).run_id for _ in range(100)]
    assert count(store) == 100
    with caplog.at_level("WARNING", logger="profiling.store.write"):
        last = record(store, run_data(trace=None))
    said = ("the run store passed its cap of 100 runs (ATTNPROF_STORE_MAX_RUNS): the 2 oldest "
            "were deleted with their tables")  # fmt: skip
    assert (last.runs_removed, last.notes(100), _warnings(caplog)) == (2, [said], [said])
    left = set(query.list_runs(store)[0]["id"])
    assert left == {*ids[2:], last.run_id}
    assert count(store, "kernels") == 99 * 2


def test_a_run_id_never_begins_with_a_dash(monkeypatch):
    """`history show -nnce...` reads the id as an option: such a draw is drawn again."""
    draws = iter(["-nnceZwVa3jCnS3Z", "--ceZwVa3jCnS3Zn", "nnceZwVa3jCnS3Z-"])
    monkeypatch.setattr(write.secrets, "token_urlsafe", lambda n: next(draws))
    assert write.new_id() == "nnceZwVa3jCnS3Z-"
