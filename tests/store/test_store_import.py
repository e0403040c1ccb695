"""`history import` is a stranger's file (issue 40): each bad field of a real export (JSON Lines
and Parquet as export_runs writes them, then changed as a forger would) refuses the whole file
with one line naming the row and the field, and nothing is imported half-way."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from profiling.store import open_store, query
from profiling.store.exchange import export_runs, import_runs
from profiling.store.traces import trace_path
from profiling.store.write import record
from profiling.user_values import ConfigError
from tests.store.store_helpers import TRACE, count, run_data

ROOT = Path(__file__).parents[2]
HEX = "0123456789abcdef" * 4


def exported(tmp_path: Path, suffix: str) -> Path:
    """Two runs (the first with its trace) exported as the exporter writes them."""
    source = open_store(tmp_path / "source.sqlite")
    record(source, run_data())
    record(source, run_data(trace=None, gpu_us=250.0))
    path = tmp_path / f"runs{suffix}"
    export_runs(source, path)
    return path


def spoil(path: Path, change: Callable[[dict], Any], every: bool = False, table: str = "run"):
    """Change the second run (every run: a Parquet column keeps one type) in place."""
    if path.suffix == ".jsonl":
        lines = [json.loads(text) for text in path.read_text().splitlines()]
        for line in lines if every else lines[1:]:
            if table == "run":
                change(line["run"])
            else:
                for row in line[table]:
                    change(row)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return
    target = path if table == "run" else path.with_name(f"{path.stem}.{table}.parquet")
    rows = pd.read_parquet(target).to_dict("records")
    for row in rows if every else rows[1:]:
        change(row)
    pd.DataFrame(rows).to_parquet(target, index=False)


def setting(name: str, value: Any) -> Callable[[dict], None]:
    return lambda row: row.__setitem__(name, value)


def dropping(name: str) -> Callable[[dict], None]:
    return lambda row: row.pop(name, None)


# (case, change, every row, table, what the message says)
BAD = [
    ("hash is a path", setting("trace_hash", "/etc/secret"), False, "run",
     "trace_hash must be 64 lowercase hex"),
    ("hash in capitals", setting("trace_hash", HEX.upper()), False, "run", "trace_hash must be"),
    ("created as text", setting("created", "yesterday"), True, "run",
     "created must be a finite number"),
    ("created 1e300", setting("created", 1e300), False, "run", "created must be seconds"),
    ("created before 2020", setting("created", 1.0), False, "run", "created must be seconds"),
    ("created a list", setting("created", [1.7e9, 1.8e9]), True, "run", "created must be a single"),
    ("status null", setting("status", None), False, "run", "status is missing"),
    ("status unknown", setting("status", "great"), False, "run", "status must be one of"),
    ("kind unknown", setting("kind", "exploit"), False, "run", "kind must be one of"),
    ("no id", dropping("id"), False, "run", "id is missing"),
    ("null id", setting("id", None), False, "run", "id is missing"),
    ("1 MB id", setting("id", "x" * 2**20), False, "run", "id is 1,048,576 characters long"),
    ("id not the store's", setting("id", "../../etc/passwd"), False, "run", "id must be an id"),
    ("negative bytes", setting("trace_bytes", -5), False, "run", "trace_bytes must be 0 or more"),
    ("60 MB reason", setting("reason", "x" * 60 * 2**20), False, "run",
     "reason is 62,914,560 characters long|line 2 is longer than 33,554,432 characters"),
    ("steps as text", setting("steps", "three"), True, "run", "steps must be a finite number"),
    ("steps 2.5", setting("steps", 2.5), False, "run", "steps must be a whole number"),
    ("kernel time as text", setting("total_us", "lots"), True, "kernels",
     "kernels row 1: total_us must be a finite number"),
    ("summary not JSON", setting("summary_json", "{not json"), False, "summaries",
     "summary_json must be a Summary"),
]  # fmt: skip


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize(("case", "change", "every", "table", "said"), BAD, ids=[b[0] for b in BAD])
def test_each_bad_field_refuses_the_file_and_imports_nothing(
    tmp_path, suffix, case, change, every, table, said
):
    path = exported(tmp_path, suffix)
    if suffix == ".parquet" and case in ("no id",):
        change = setting("id", None)  # a Parquet column is there for every row or none
    spoil(path, change, every, table)
    store = open_store(tmp_path / "here.sqlite")
    with pytest.raises(ValueError) as refused:
        import_runs(store, path)
    message = str(refused.value)
    assert re.search(said, message) and path.name in message, message[:400]
    assert "nothing was imported" in message
    assert "\n" not in message and len(message) < 400, message[:400]
    assert not store.path.exists() or count(store) == 0  # not the first, good run either


def test_a_run_too_large_with_its_child_rows_is_refused(tmp_path):
    """A 60 MB row was accepted: a run and its child rows are bounded together (16 MiB)."""
    path = exported(tmp_path, ".jsonl")
    spoil(path, setting("name", "k" * 60_000), table="kernels")
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    lines[1]["kernels"] = lines[1]["kernels"] * 150  # 300 rows of 60 kB: 17 MiB
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store = open_store(tmp_path / "here.sqlite")
    with pytest.raises(ValueError, match=r"run 2 \(id .*\): takes 17\.\d MiB"):
        import_runs(store, path)
    assert not store.path.exists() or count(store) == 0


def test_wrong_parquet_columns_are_refused_in_one_line(tmp_path):
    path = exported(tmp_path, ".parquet")
    kernels = path.with_name("runs.kernels.parquet")
    for source, said in ((kernels, "has no 'id' column"),):
        with pytest.raises(ValueError, match=said):
            import_runs(open_store(tmp_path / "here.sqlite"), source)
    pd.read_parquet(kernels).drop(columns="run_id").to_parquet(kernels, index=False)
    with pytest.raises(ValueError, match="kernels rows have no run_id column"):
        import_runs(open_store(tmp_path / "here.sqlite"), path)
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="is not a Parquet file"):
        import_runs(open_store(tmp_path / "here.sqlite"), path)


def test_a_forged_trace_path_never_reaches_a_file_outside_the_store(tmp_path):
    """A row's trace_hash `/abs/dir/secret` once made History serve `/abs/dir/secret.json.gz`,
    and with trace_bytes=10**12 the next click's size cap deleted it."""
    secret = tmp_path / "outside" / "secret"
    secret.parent.mkdir()
    secret.with_name("secret.json.gz").write_bytes(TRACE.read_bytes())
    path = exported(tmp_path, ".jsonl")
    spoil(path, lambda run: run.update(trace_hash=str(secret), trace_bytes=10**12))
    store = open_store(tmp_path / "here.sqlite", max_bytes=TRACE.stat().st_size)
    with pytest.raises(ValueError, match="trace_hash"):
        import_runs(store, path)
    record(store, run_data())  # a click, with the size cap
    assert secret.with_name("secret.json.gz").is_file()
    with pytest.raises(ValueError, match="64 lowercase hex"):
        trace_path(store.traces, str(secret))


def test_imported_runs_are_marked_imported_whatever_their_origin_says(tmp_path, monkeypatch):
    """`origin_space` forged to the Space's id showed an imported run as the Space's own;
    a forged trace size does not enter the cap's count (the file's own size does)."""
    path = exported(tmp_path, ".jsonl")
    spoil(path, setting("origin_space", "someone/attention-profiler"), every=True)
    spoil(path, setting("trace_bytes", 10**12), every=True)
    store = open_store(tmp_path / "here.sqlite")
    assert import_runs(store, path).added == 2
    runs = query.list_runs(store)[0]
    assert set(runs["origin"]) == {"import"}
    stored = {query.get_run(store, i)["trace_bytes"] for i in runs["id"]}
    assert stored == {TRACE.stat().st_size, None}
    monkeypatch.setenv("SPACE_ID", "someone/attention-profiler")
    assert query.list_runs(store)[1] == 0
    with pytest.raises(ConfigError, match="no run"):
        query.get_run(store, runs["id"][0])


def test_the_cli_says_a_refused_import_in_one_line(tmp_path):
    path = exported(tmp_path, ".jsonl")
    spoil(path, setting("created", "1e300"))
    done = subprocess.run(
        [sys.executable, "-m", "profiling", "history", "--store", str(tmp_path / "here.sqlite"),
         "import", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "runs.jsonl: run 2" in done.stderr, done.stderr
