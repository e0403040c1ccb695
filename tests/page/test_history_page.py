"""The History tab's handlers as the page and the API call them (issue 40's page side, issue 42
items 2 and 4): messages escaped and named per action, the store named by its file name only,
a stored trace read as an upload is (a real gzip bomb in a real store), the picks counted, a
permalink's run that cannot be opened said in place, a download named by the run's tag, and
the tab saying that every visitor sees every run. Real CPU runs, real stores (SQLite)."""

from __future__ import annotations

import copy
import gzip
import os
import time
import zlib
from pathlib import Path

import gradio as gr
import pytest

from profiling.page import history_tab, profile_tab
from profiling.store import hooks, open_store, query
from profiling.store.rows import RunData
from profiling.views import history as views_history
from profiling.views import shared as views_shared
from profiling.views import upload_worker

MiB = 1024**2
ROOT = Path(__file__).parents[2]
SMALL = dict(seq_len=128, dtype="float32", batch=1, heads=2, head_dim=16, causal=True)
HOSTILE = '<img/src="http://example.invalid/x.png"/onerror=alert(1)>'  # one id: no space
FILTERS = ("", "", "", "", "", "", 200)


def no_progress(*args, **kwargs) -> None:
    return None


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> dict:
    """One real CPU run's summary (the page's JSON), made once for the module's stores."""
    saved = os.environ["ATTNPROF_STORE"]
    os.environ["ATTNPROF_STORE"] = str(tmp_path_factory.mktemp("first") / "runs.sqlite")
    try:
        return profile_tab.profile("naive", **SMALL, progress=no_progress)[1]
    finally:
        os.environ["ATTNPROF_STORE"] = saved


@pytest.fixture
def store(tmp_path, monkeypatch):
    folder = tmp_path / "a-private-folder"
    folder.mkdir()
    monkeypatch.setenv("ATTNPROF_STORE", str(folder / "runs.sqlite"))
    return open_store()


def _kept(summary: dict, trace: Path | None) -> str:
    """A run written into the store as the page writes one (its trace copied in by hash)."""
    data = RunData("profile", "test", summary["config"], "ok", summary=copy.deepcopy(summary),
                   trace_gz=trace)  # fmt: skip
    [run_id] = hooks.keep([data]).ids
    assert run_id is not None
    return run_id


def _message(call, *args) -> str:
    with pytest.raises(gr.Error) as error:
        call(*args)
    return str(error.value.message)


# -- item 1 and 4: ids escaped, the store by its file name only --------------------------------
def test_an_unknown_id_is_escaped_and_the_store_named_by_its_file_only(store):
    said = _message(history_tab.history_run, HOSTILE)
    assert "<img" not in said and "&lt;img" in said
    assert "is not in this run store (runs.sqlite)" in said
    assert "a-private-folder" not in said and str(store.path.parent) not in said
    for call in (history_tab.history_trend, history_tab.history_compare):
        said = _message(call, f"{HOSTILE} other" if call is history_tab.history_compare else
                        HOSTILE)  # fmt: skip
        assert "<img" not in said and "a-private-folder" not in said, said


def test_the_list_note_names_the_store_by_its_file_only(store, profiled):
    _kept(profiled, None)
    _, note = history_tab.history()
    assert "`runs.sqlite`" in note and "a-private-folder" not in note
    # the CLI, on the user's own machine, keeps the full path
    assert str(store.path) in views_history.history_note(1, 1, store)


# -- item 3: an unexpected error says what was being done --------------------------------------
def test_an_unexpected_error_is_worded_by_what_was_being_done(store, profiled, monkeypatch):
    run_id = _kept(profiled, None)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(query, "list_runs", broken)
    said = _message(history_tab.history)
    assert "while listing the stored runs" in said and "profiling" not in said, said
    monkeypatch.setattr(views_history, "stored_summary", broken)
    monkeypatch.setattr(query, "workload_runs", broken)
    monkeypatch.setattr(query, "children", broken)
    expected = {history_tab.history_run: "while opening the run",
                history_tab.history_trend: "while drawing the trend"}  # fmt: skip
    for call, words in expected.items():
        said = _message(call, run_id)
        assert words in said and "profiling" not in said, said


# -- issue 42, item 2: the picks counted, per action ---------------------------------------------
def test_two_picks_to_open_or_trend_say_pick_one(store, profiled):
    a, b = _kept(profiled, None), _kept(profiled, None)
    assert _message(history_tab.history_run, f"{a} {b}") == "pick one run to open (got 2)"
    said = _message(history_tab.history_trend, f"{a},{b}")
    assert said == "pick one run to draw its workload's trend (got 2)"
    assert _message(history_tab.history_diff, a) == "pick two runs to diff (got 1)"


def test_a_permalink_that_cannot_open_says_why_once_in_the_run_panel(store, profiled):
    """On load there is no toast: the reason goes to the Run panel, the rest is emptied (no
    badges), and the list still shows."""
    _kept(profiled, None)
    runs, note, origin, *rest = history_tab._list_and_open("nope<b>x</b>", *FILTERS)
    assert len(runs) == 1 and "1 stored run" in note
    assert origin.startswith("**Run not opened:** run ")
    assert "is not in this run store (runs.sqlite)" in origin and "<b>" not in origin
    assert rest[:8] == [""] + [None] * 7 and rest[8].interactive is False
    assert rest[9:] == [None, None, None, ""]  # a model run's views (issue 43): empty


# -- issue 42, item 4: a download named by the run's tag ----------------------------------------
def test_a_reopened_runs_download_is_named_by_its_tag(store):
    """The Profile download's name, plus the start of the run's id (not the store's hash)."""
    shown = profile_tab.profile("naive", **SMALL, progress=no_progress)
    [gz] = [Path(x) for x in shown if isinstance(x, str | Path) and str(x).endswith(".json.gz")]
    run_id, profile_download = shown[1]["run_id"], gz.name
    served = Path(history_tab.history_run(run_id)[history_tab.TRACE])
    tag = profile_download.removesuffix(".json.gz")
    stem = f"{tag}_{run_id[:8]}".rstrip(".-")  # a download name never ends in "-" or "."
    assert served.name == f"{stem}.json.gz", (served.name, profile_download)
    assert gzip.decompress(served.read_bytes()) == gzip.decompress(gz.read_bytes())


def test_an_imported_rows_text_never_makes_the_download_name():
    run = {"id": "../../etc/passwd", "variant": "a/../../b", "device": "cpu", "batch": 1}
    named = views_history.download_name(run)
    assert named == "run_..-..-et.json.gz" and Path(named).name == named  # one component
    named = views_history.download_name({"id": "x" * 9, "variant": "v\n<b>", "device": "cpu",
                                         **{k: 1 for k in ("batch", "heads", "head_dim",
                                                           "seq_len", "steps")},
                                         "dtype": "f32", "causal": True})  # fmt: skip
    assert "/" not in named and "<" not in named and "\n" not in named


# -- item 2: a stored trace is read as an upload is ---------------------------------------------
def json_bomb(path: Path, expanded: int) -> Path:
    """`expanded` bytes of valid trace JSON (complete events, all alike), gzipped small: one
    64 MiB member compressed once and repeated between an opening and a closing member."""
    event = b'{"ph":"X","name":"aten::mm","cat":"cpu_op","ts":1,"dur":1,"pid":1,"tid":1},'
    block = event * (64 * MiB // len(event))
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = member.compress(block) + member.flush()
    with open(path, "wb") as fh:
        fh.write(gzip.compress(b'{"traceEvents":['))
        for _ in range(expanded // len(block)):
            fh.write(packed)
        fh.write(gzip.compress(event[:-1] + b"]}"))
    return path


def _rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_stored_gzip_bomb_is_refused_as_an_upload_in_bounded_memory(store, profiled, tmp_path):
    """1 GiB of trace JSON in a 3.5 MB gzip, kept in the store as a run's trace: opening it reads
    it in the upload worker, which the watchdog stops at the uploads' memory budget; the
    server's memory does not grow with it, and the worker is gone."""
    bomb = json_bomb(tmp_path / "bomb.json.gz", 1024 * MiB)
    assert bomb.stat().st_size < 4 * MiB  # 3.5 MB: deflate packs a 78-byte period ~300:1
    run_id = _kept(profiled, bomb)
    kept = views_history.stored_trace(store, query.get_run(store, run_id))
    assert kept.parent == store.traces and kept.stat().st_size == bomb.stat().st_size
    before, started = _rss(), time.monotonic()
    workers_before = {w.process.pid for w in upload_worker.POOL.running}
    said = _message(history_tab.history_run, run_id)
    assert said == upload_worker.over_memory(False), said
    assert time.monotonic() - started < upload_worker.UPLOAD_SECONDS
    assert _rss() - before < 256 * MiB  # the server never held the trace
    assert not upload_worker.POOL.running and not workers_before


def test_a_stored_diff_reads_both_traces_under_the_upload_limits(store, profiled, tmp_path,
                                                                monkeypatch):  # fmt: skip
    """History's Diff reads its two stored traces in the upload worker, under the limits the
    server sends with each task (lowered here, so the refusal comes in a second)."""
    bomb = json_bomb(tmp_path / "bomb.json.gz", 128 * MiB)
    monkeypatch.setattr(views_shared, "TRACE_MAX_EXPANDED_BYTES", 64 * MiB)
    said = _message(history_tab.history_diff, f"{_kept(profiled, bomb)} {_kept(profiled, bomb)}")
    assert said.startswith("trace A: the trace expands to more than 64 MiB of JSON"), said


# -- item 6: a public Space's History is everyone's ---------------------------------------------
def test_the_tab_and_the_readme_say_every_visitor_sees_every_run():
    import app

    [intro] = [b.value for b in app.demo.blocks.values() if getattr(b, "elem_id", None) ==
               "history-intro"]  # fmt: skip
    assert "Every visitor sees every run" in intro and "other visitors'" in intro
    readme = (ROOT / "README.md").read_text()
    history = readme[readme.index("## History: every run kept") :]
    assert "**Every visitor sees every run.**" in history and "every other visitor's" in history


def test_a_stored_diffs_headline_is_text_not_markup(store, profiled, monkeypatch):
    """The labels (from the store's rows) and the traces' names reach a Markdown panel escaped."""
    from tests.conftest import FLASH, NAIVE

    labels = iter(["<img/src=x>", "**B**"])
    monkeypatch.setattr(views_history, "run_label", lambda run: next(labels))
    picked = f"{_kept(profiled, NAIVE)} {_kept(profiled, FLASH)}"
    headline = history_tab.history_diff(picked)[0]
    assert "<img" not in headline and "&lt;img/src=x&gt;" in headline
    assert "\\*\\*B\\*\\*" in headline
