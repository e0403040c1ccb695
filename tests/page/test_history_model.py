"""Model runs through the page's handlers (issue 43): a Model click keeps each implementation
in the run store and offers its trace; History lists it, reopens it with the Model views (its
Gantt from the kept trace), diffs two model runs or a model run against a variant's; a damaged
stored summary is said, not shown; the Model tab's Sweep checks its inputs, runs, keeps and
zips its points. A real tiny transformers model on the CPU, real SQLite stores."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import zipfile
from pathlib import Path

import gradio as gr
import pandas as pd
import pytest

from profiling.page import history_tab, model_sweep, model_tab, profile_tab
from profiling.store import open_store, query
from profiling.store.write import apply_cap

TINY = dict(preset="tiny", layers=2, dtype="float32", batch=2, seq_len=32, lengths="32,20",
            mode="prefill", new_tokens=1)  # fmt: skip
TAG = "tiny_2L_B2_S32_ragged_float32_prefill"
LABEL = "tiny ×2 layers B2 S32 lengths 32,20 float32 prefill"


def no_progress(*args, **kwargs) -> None:
    return None


@pytest.fixture(scope="module")
def clicked(tmp_path_factory):
    """One Model click (eager, sdpa; kernels refused on a CPU) into this module's store."""
    saved = os.environ["ATTNPROF_STORE"]
    os.environ["ATTNPROF_STORE"] = str(tmp_path_factory.mktemp("model") / "runs.sqlite")
    try:
        shown = model_tab.model(**TINY, implementations=["eager", "sdpa", "kernels"],
                                progress=no_progress)  # fmt: skip
        yield shown, open_store()
    finally:
        os.environ["ATTNPROF_STORE"] = saved


@pytest.fixture
def here(clicked, monkeypatch):
    """The click's store as the default one (the handlers open it)."""
    shown, store = clicked
    monkeypatch.setenv("ATTNPROF_STORE", str(store.path))
    runs = query.list_runs(store)[0]
    ids = dict(zip(runs["variant"], runs["id"], strict=True))
    return shown, store, ids


def _copy(store, folder: Path) -> Path:
    """A copy of the store and its traces, to spoil or prune without touching the click's."""
    copy = folder / "runs.sqlite"
    with sqlite3.connect(store.path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    shutil.copytree(store.traces, open_store(copy).traces)
    return copy


def _message(call, *args, **kwargs) -> str:
    with pytest.raises(gr.Error) as error:
        call(*args, **kwargs)
    return str(error.value.message)


def test_a_model_click_keeps_each_implementation_and_offers_its_trace(here):
    shown, store, ids = here
    verdict, *_, traces = shown
    assert sorted(ids) == ["eager", "kernels", "sdpa"]
    for name in ("eager", "sdpa", "kernels"):  # each run's permalink under the verdict
        assert f"[{ids[name]}](?run={ids[name]}) ({name})" in verdict
    assert [Path(path).name for path in traces] == [f"eager_{TAG}.json.gz", f"sdpa_{TAG}.json.gz"]
    for name, path in zip(("eager", "sdpa"), traces, strict=True):
        assert b'"model_layer_1"' in gzip.decompress(Path(path).read_bytes())
        stored = history_tab._served(
            Path(store.traces) / f"{query.get_run(store, ids[name])['trace_hash']}.json.gz", "x"
        )
        assert Path(stored).read_bytes() == Path(path).read_bytes()  # the trace it kept
    listed, note = history_tab.history(shape="tiny")
    assert "3 stored runs match" in note
    assert set(listed["Kind"]) == {"model"} and set(listed["Shape"]) == {LABEL}
    assert listed.set_index("Variant").loc["kernels", "Status"] == "unavailable"
    # the filters pick a model run by its implementation and mode, as the page offers them
    listed, _ = history_tab.history(variant="sdpa", mode="prefill")
    assert listed["Run"].tolist() == [ids["sdpa"]]
    assert {"eager", "flex_attention"} < set(history_tab.FILTERED_VARIANTS)


def test_history_opens_a_model_run_with_the_model_views(here):
    shown, _, ids = here
    origin, strip, gantt, *variant_only, summary, trace, table, categories, layers, why = (
        history_tab.history_run(ids["sdpa"])
    )
    assert ids["sdpa"] in origin and "(model, app, CPU" in origin
    assert variant_only == [None] * 5  # no kernel, role, roofline or operator table
    assert '<div class="ap-value">sdpa</div>' in strip and "flash (CPU)" in strip
    drawn = gantt.to_json()
    assert "model_layer_0" in drawn and "model_layer_1" in drawn
    live = shown[1].set_index("implementation").loc[["sdpa"]].reset_index()
    pd.testing.assert_frame_equal(table, live.drop(columns="× eager"))  # no eager beside it
    pd.testing.assert_frame_equal(
        categories, shown[2][shown[2]["implementation"] == "sdpa"].reset_index(drop=True)
    )
    assert layers["layer"].tolist() == [0, 1]
    assert "the trace shows SDPA's flash (CPU) backend ran" in why and why.startswith("```text")
    assert summary["implementation"]["id"] == "sdpa" and summary["model"]["text"] == LABEL
    stem = f"sdpa_{TAG}_{ids['sdpa'][:8]}".rstrip(".-")  # a name never ends in "-" or "."
    assert Path(trace).name == f"{stem}.json.gz"
    assert history_tab.show_columns(summary)[1].visible is True  # the Model column shown
    refused = _message(history_tab.history_run, ids["kernels"])
    assert refused.startswith(f"run {ids['kernels']} did not run (unavailable: kernels:")


def test_a_model_run_whose_trace_was_pruned_keeps_its_views(here, tmp_path, monkeypatch):
    _, store, ids = here
    monkeypatch.setenv("ATTNPROF_STORE", str(_copy(store, tmp_path)))
    assert history_tab.history_run(ids["eager"])[2] is not None  # its Gantt, before the cap
    apply_cap(open_store(), 0)
    origin, _, gantt, *_, trace, table, _, _, why = history_tab.history_run(ids["eager"])
    assert "pruned" in origin and gantt is None and trace is None
    assert table["implementation"].tolist() == ["eager"] and "eager: attention ran" in why


def test_history_diffs_model_runs_and_a_model_run_against_a_variant(here):
    _, _, ids = here
    headline, _, operators, _ = history_tab.history_diff(f"{ids['eager']} {ids['sdpa']}")
    eager, sdpa = f"model eager · {ids['eager'][:6]}", f"model sdpa · {ids['sdpa'][:6]}"
    said = headline.replace("\\", "")  # Markdown's escapes
    assert said.startswith(f"{sdpa} runs") and eager in said
    assert "aten::scaled_dot_product_attention" in operators["operator"].tolist()
    variant = profile_tab.profile(
        "sdpa-math", seq_len=64, dtype="float32", batch=2, heads=4, head_dim=16, causal=True,
        progress=no_progress,
    )[1]["run_id"]  # fmt: skip
    said = history_tab.history_diff(f"{variant},{ids['sdpa']}")[0].replace("\\", "")
    assert f"sdpa-math · {variant[:6]}" in said and sdpa in said


def test_a_damaged_model_summary_is_said_in_one_line(here, tmp_path, monkeypatch):
    _, store, ids = here
    copy = _copy(store, tmp_path)
    with sqlite3.connect(copy) as target:
        summary = json.loads(
            target.execute(
                "SELECT summary_json FROM summaries WHERE run_id = ?", (ids["sdpa"],)
            ).fetchone()[0]
        )
        summary["implementation"]["split"]["layers"] = [[0, "<b>x</b>", 1.0]]
        target.execute("UPDATE summaries SET summary_json = ? WHERE run_id = ?",
                       (json.dumps(summary), ids["sdpa"]))  # fmt: skip
    monkeypatch.setenv("ATTNPROF_STORE", str(copy))
    said = _message(history_tab.history_run, ids["sdpa"])
    assert said.startswith(f"run {ids['sdpa']} cannot be shown: the model summary's split.layers")
    assert "<b>" not in said and "\n" not in said


HOSTILE = "<img src=x onerror=alert(1)>"


def test_a_strangers_text_in_a_stored_model_run_stays_text(here, tmp_path, monkeypatch):
    """An imported store's text: escaped in the strip and the Gantt's title, and a note with
    backticks cannot close the block it is shown in."""
    _, store, ids = here
    copy = _copy(store, tmp_path)
    with sqlite3.connect(copy) as target:
        summary = json.loads(
            target.execute(
                "SELECT summary_json FROM summaries WHERE run_id = ?", (ids["sdpa"],)
            ).fetchone()[0]
        )
        summary["model"]["text"] = HOSTILE
        summary["implementation"]["note"] = "````\n# owned"
        target.execute("UPDATE summaries SET summary_json = ? WHERE run_id = ?",
                       (json.dumps(summary), ids["sdpa"]))  # fmt: skip
        target.execute("UPDATE runs SET shape = ? WHERE id = ?", (HOSTILE, ids["sdpa"]))
    monkeypatch.setenv("ATTNPROF_STORE", str(copy))
    _, strip, gantt, *_, why = history_tab.history_run(ids["sdpa"])
    assert "<img" not in strip and "&lt;img src=x onerror=alert(1)&gt;" in strip
    assert gantt.layout["title"]["text"] == f"sdpa: {HOSTILE}".replace("<", "&lt;").replace(
        ">", "&gt;"
    )  # escaped once: shown as the text it is
    fence = why.splitlines()[0].removesuffix("text")
    assert len(fence) == 5 and why.endswith("\n" + fence)  # longer than the note's four
    assert f"\n{fence}\n" not in why.removesuffix("\n" + fence)


@pytest.mark.parametrize(
    ("change", "said"),
    [({"seq_lens": "³"}, "seq_lens must be whole numbers separated by commas"),
     ({"seq_lens": list(range(16, 25))}, "seq_lens must be up to 8 whole numbers"),
     ({"seq_lens": [16, 4096]}, "tiny takes at most 2048 positions"),
     ({"implementations": ["eager", "../x"]}, "implementation must be one of"),
     ({"layers": "2; rm"}, "layers must be a whole number")],
)  # fmt: skip
def test_the_model_sweep_refuses_a_bad_input_in_one_line(change, said):
    fields = dict(preset="tiny", layers=1, dtype="float32", batch=1, seq_lens=[16, 32],
                  mode="prefill", new_tokens=1, implementations=["sdpa"])  # fmt: skip
    assert said in _message(model_sweep.model_sweep, **{**fields, **change}, progress=no_progress)


def test_the_model_sweep_runs_keeps_and_zips_its_points(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNPROF_STORE", str(tmp_path / "runs.sqlite"))
    figure, points, zipped = model_sweep.model_sweep(
        "tiny", 1, "float32", 1, [32, 16], "prefill", 1, ["eager", "sdpa"], progress=no_progress
    )
    assert [(row["S"], row["implementation"]) for _, row in points.iterrows()] == [
        (16, "eager"), (16, "sdpa"), (32, "eager"), (32, "sdpa")]  # fmt: skip
    names = [trace["name"] for trace in figure.data]
    assert names == ["eager: step", "eager: attention", "sdpa: step", "sdpa: attention"]
    assert figure.data[0]["x"] == [16, 32] and figure.layout["xaxis"]["type"] == "log"
    with zipfile.ZipFile(zipped) as archive:
        listed = sorted(archive.namelist())
    assert listed == ["S16/eager_tiny_1L_B1_S16_float32_prefill.json.gz",
                      "S16/sdpa_tiny_1L_B1_S16_float32_prefill.json.gz",
                      "S32/eager_tiny_1L_B1_S32_float32_prefill.json.gz",
                      "S32/sdpa_tiny_1L_B1_S32_float32_prefill.json.gz", "points.csv"]  # fmt: skip
    runs = query.list_runs(open_store())[0]
    assert set(runs["kind"]) == {"model-sweep"} and len(runs) == 4
    assert sorted(runs["shape"]) == ["tiny ×1 layers B1 S16 float32 prefill"] * 2 + [
        "tiny ×1 layers B1 S32 float32 prefill"] * 2  # fmt: skip
