"""Runs made through the page, its API handlers and the CLI are kept in the run store and
reopened with the figures they showed (issue 34); uploads are never kept. Real CPU runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gradio as gr
import pandas as pd
import pytest

from profiling.page import analyze_tab, compare_tab, diff_tab, history_tab, profile_tab, sweep_tab
from profiling.store import open_store, query
from profiling.store.write import apply_cap
from tests.conftest import FIXTURES, NAIVE
from tests.store.store_helpers import count

ROOT = Path(__file__).parents[2]
SMALL = dict(seq_len=128, dtype="float32", batch=1, heads=2, head_dim=32, causal=True)
INPLACE = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"


def no_progress(*args, **kwargs) -> None:
    return None


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNPROF_STORE", str(tmp_path / "runs.sqlite"))
    return open_store()


def _without_kept_line(strip: str) -> str:
    return strip.split('<div class="ap-extra" id="kept">')[0]


def test_a_profile_click_is_kept_and_reopens_with_identical_figures(store):
    shown = profile_tab.profile("naive", **SMALL, progress=no_progress)
    run_id = shown[1]["run_id"]
    assert f"?run={run_id}" in shown[0]  # the strip says where it is kept
    origin, strip, gantt, kernels, roles, _plot, roofline, operators, summary, trace, *model = (
        history_tab.history_run(run_id)
    )
    assert model == [None, None, None, ""]  # a model run's views (issue 43): not this run's
    assert run_id in origin and Path(trace).is_file()
    assert strip == _without_kept_line(shown[0])
    assert gantt.to_json() == shown[5].to_json()
    pd.testing.assert_frame_equal(operators, shown[2])
    pd.testing.assert_frame_equal(kernels, shown[3])
    pd.testing.assert_frame_equal(roles, shown[10])
    pd.testing.assert_frame_equal(roofline, shown[12], check_dtype=False)
    assert summary == {k: v for k, v in shown[1].items() if k != "run_id"}
    stored = query.get_run(store, run_id)
    assert stored["cpu_us"] == shown[1]["cpu_us_per_forward"] and stored["origin"] == "app"
    listed, note = history_tab.history(variant="naive")
    assert listed["Run"].tolist() == [run_id] and "1 stored run" in note
    # its trace pruned (the size cap): the row stays, and reopens with its stored figures
    assert apply_cap(store, 0).traces == 1
    assert history_tab.history()[0]["Trace"].tolist() == ["pruned"]
    origin, strip, gantt, _kernels_again, *_, operators_again, _summary, trace = (
        history_tab.history_run(run_id)[: history_tab.TRACE + 1]
    )
    assert "pruned" in origin and "trace pruned" in strip and gantt is None and trace is None
    assert _without_kept_line(shown[0]).split('<div class="ap-launch">')[0] in strip
    pd.testing.assert_frame_equal(operators_again, shown[2], check_dtype=False)


def test_uploads_to_analyse_and_diff_are_never_kept(store):
    analyze_tab.analyze(str(NAIVE), progress=no_progress)
    diff_tab.diff(str(NAIVE), str(INPLACE))
    assert not store.path.exists() or count(store) == 0


def test_each_compare_row_and_sweep_point_is_kept_with_its_status(store):
    compare_tab.compare(["naive", "sdpa-cudnn"], **SMALL, progress=no_progress)
    sweep_tab.sweep(["naive"], [256, 512], "float32", 1, 2, 32, True, progress=no_progress)
    runs, total = query.list_runs(store)
    assert total == 4
    kinds = runs.groupby("kind")["status"].apply(sorted).to_dict()
    assert kinds == {"compare": ["ok", "unavailable"], "sweep": ["ok", "ok"]}
    unavailable = runs[runs["status"] == "unavailable"].iloc[0]
    assert query.get_run(store, unavailable["id"])["reason"]  # the reason, kept


def test_history_handlers_say_what_is_wrong(store):
    for handler, value, said in (
        (history_tab.history_run, "no-such-run", "run 'no-such-run' is not in this run store"),
        (history_tab.history_diff, "just-one", r"pick two runs to diff \(got 1\)"),
        (history_tab.history_compare, "", r"pick 2–50 different runs to compare \(got 0\)"),
    ):  # the message users read, not any crash errors.py turned into a gr.Error
        with pytest.raises(gr.Error, match=said):
            handler(value)
    with pytest.raises(gr.Error, match="YYYY-MM-DD"):
        history_tab.history(since="last week")


def test_the_cli_keeps_its_runs_unless_told_not_to(tmp_path):
    env = {**os.environ, "ATTNPROF_STORE": str(tmp_path / "env.sqlite")}
    base = [sys.executable, "-m", "profiling", "--variant", "naive", "--seq-len", "128",
            "--batch", "1", "--heads", "2", "--head-dim", "16", "--dtype", "float32",
            "--device", "cpu", "--out", str(tmp_path / "traces")]  # fmt: skip
    done = subprocess.run([*base, "--no-store"], cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == 0 and not (tmp_path / "env.sqlite").exists()
    chosen = tmp_path / "chosen.sqlite"
    done = subprocess.run([*base, "--store", str(chosen)], cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == 0 and b"kept in the run store" in done.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "profiling", "history", "--store", str(chosen), "list"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert "naive" in listed.stdout and "1 stored runs match" in listed.stdout
