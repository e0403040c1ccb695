"""The store's file as the user names and keeps it (issue 40): names with URI characters are
literal names, a read-only store is read and said to be read-only, dates at the calendar's ends
are filters, not crashes. Real files, the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiling.store import open_store, query
from profiling.store.connection import forget
from profiling.store.exchange import import_runs
from profiling.store.write import record
from profiling.user_values import ConfigError
from tests.store.store_helpers import count, run_data

ROOT = Path(__file__).parents[2]


def history(store: Path, *command: str, privileged: bool = True) -> subprocess.CompletedProcess:
    """`python -m profiling history --store STORE ...`; unprivileged: as root, without the
    capabilities that let root write a read-only file (else a read-only store is not one)."""
    line = [sys.executable, "-m", "profiling", "history", "--store", str(store), *command]
    if not privileged and os.geteuid() == 0:
        assert shutil.which("setpriv"), "setpriv (util-linux) drops root's file capabilities"
        line = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *line]
    return subprocess.run(line, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", ["run#s.sqlite", "x?mode=rwc&y.sqlite", "50%.sqlite"])
def test_a_store_named_with_uri_characters_is_that_file(tmp_path, name):
    """`run#s.sqlite` went into an SQLite URI unquoted: importing it opened (and created) a
    file `run`; `x?mode=rwc&y.sqlite` opened `x` read-write."""
    folder = tmp_path / "source"
    folder.mkdir()
    source = open_store(folder / name)
    ids = {record(source, run_data(trace=None)).run_id for _ in range(2)}
    forget(source.path)
    target = open_store(tmp_path / "target.sqlite")
    assert import_runs(target, source.path).added == 2
    assert set(query.list_runs(target)[0]["id"]) == ids
    made = {p.name for p in folder.iterdir()}  # the store and its -wal, -shm: no `run`, no `x`
    assert made <= {name, f"{name}-wal", f"{name}-shm"}, made
    read_only = history(source.path, "list")
    assert read_only.returncode == 0 and all(i in read_only.stdout for i in ids)


@pytest.mark.parametrize("locked", ["file", "folder"])
def test_a_read_only_store_is_listed_and_said_read_only(tmp_path, locked):
    """A store on a read-only mount (here: its file, or its folder, read-only) failed even
    `history list` with "move it aside". It is read as it is, and a write says why not."""
    folder = tmp_path / "mount#1"
    store = open_store(folder / "runs.sqlite")
    ids = [record(store, run_data()).run_id for _ in range(2)]
    forget(store.path)
    other = open_store(tmp_path / "other.sqlite")
    record(other, run_data(trace=None))
    forget(other.path)
    locks = [store.path] if locked == "file" else [store.path, folder, store.traces]
    modes = {path: path.stat().st_mode for path in locks}
    try:
        for path in locks:
            path.chmod(0o555 if path.is_dir() else 0o444)
        listed = history(store.path, "list", privileged=False)
        shown = history(store.path, "show", ids[0], privileged=False)
        written = history(store.path, "import", str(other.path), privileged=False)
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert listed.returncode == 0, listed.stderr
    assert all(i in listed.stdout for i in ids) and "read-only" in listed.stdout
    assert "move it aside" not in listed.stdout + listed.stderr
    assert shown.returncode == 0 and ids[0] in shown.stdout, shown.stderr
    assert written.returncode == 2 and "is read-only" in written.stderr
    assert "Traceback" not in written.stderr and count(store) == 2


def test_dates_at_the_calendars_ends_filter_and_bad_ones_are_refused(tmp_path):
    """`until=9999-12-31` overflowed a datetime (the generic error on the page, a traceback in
    the CLI); it is the end of time. A date that is none, or since after until, is said."""
    store = open_store(tmp_path / "runs.sqlite")
    run_id = record(store, run_data(trace=None)).run_id
    wide = query.checked_filters(since="0001-01-01", until="9999-12-31")
    assert query.list_runs(store, wide)[0]["id"].tolist() == [run_id]
    listed = history(store.path, "list", "--until", "9999-12-31")
    assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
    bad_dates = [(dict(until="2026-02-30"), "until must be a date as YYYY-MM-DD"),
                 (dict(since="10000-01-01"), "since must be a date"),
                 (dict(since="2026-12-05", until="2026-12-01"), "must not be after")]  # fmt: skip
    for bad, said in bad_dates:
        with pytest.raises(ConfigError, match=said):
            query.checked_filters(**bad)
    refused = history(store.path, "list", "--since", "2026-12-05", "--until", "2026-12-01")
    assert refused.returncode == 2 and refused.stderr.startswith("error: since (2026-12-05)")


def test_the_rows_cap_deletes_the_oldest_runs_with_their_tables_and_traces(tmp_path, monkeypatch):
    """Rows grew without a bound (~7 KB a run, 3 runs a second from anonymous callers): past
    ATTNPROF_STORE_MAX_RUNS the oldest runs go, their child rows and unshared traces too."""
    from profiling.store import hooks, location
    from profiling.store.traces import trace_path
    from tests.store.store_helpers import OTHER_TRACE

    store = open_store(tmp_path / "runs.sqlite", max_runs=3)
    first = record(store, run_data(trace=OTHER_TRACE)).run_id  # its trace is its own
    second = record(store, run_data()).run_id  # its trace is shared with a later run
    kept = hooks.keep([run_data(), run_data(trace=None), run_data(trace=None)], store)
    assert kept.notes == ["the run store passed its cap of 3 runs (ATTNPROF_STORE_MAX_RUNS): "
                          "the 1 oldest were deleted with their tables"]  # fmt: skip
    runs = query.list_runs(store)[0]
    assert set(runs["id"]) == set(kept.ids) and first not in set(runs["id"])
    assert count(store, "kernels") == 3 * 2 and count(store, "summaries") == 3
    shared = query.get_run(store, kept.ids[0])["trace_hash"]
    assert trace_path(store.traces, shared).is_file()  # still named by a kept run
    assert sorted(p.name for p in store.traces.iterdir()) == [f"{shared}.json.gz"]
    assert second not in set(runs["id"])
    for raw, said in (("lots", "a number of runs"), ("0", "1 or more runs")):
        monkeypatch.setenv("ATTNPROF_STORE_MAX_RUNS", raw)
        with pytest.raises(ValueError, match=f"ATTNPROF_STORE_MAX_RUNS must be {said}"):
            location.max_runs()
    monkeypatch.delenv("ATTNPROF_STORE_MAX_RUNS")
    assert open_store(tmp_path / "runs.sqlite").max_runs == location.DEFAULT_MAX_RUNS == 100_000
    forget(store.path)
    pruned = history(store.path, "prune", "--max-runs", "1")
    assert pruned.returncode == 0 and "the 2 oldest were deleted" in pruned.stdout
    assert count(store) == 1 and not any(store.traces.iterdir())  # the newest had no trace
