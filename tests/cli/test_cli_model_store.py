"""`python -m profiling model` keeps each implementation in the run store as the variants'
commands keep theirs (issue 43): `--store PATH`, `--no-store`, ATTNPROF_STORE; `history list |
show | diff` read model runs, `show` and `diff` without torch (a laptop reads a GPU machine's
runs). A real tiny transformers model on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiling.__main__ import main
from profiling.store import open_store, query

ROOT = Path(__file__).parents[2]
MODEL = ["model", "--preset", "tiny", "--layers", "1", "--batch", "2", "--seq-len", "32",
         "--lengths", "32,20", "--dtype", "float32", "--steps", "1",
         "--attn", "eager,sdpa,kernels"]  # fmt: skip
LABEL = "tiny ×1 layers B2 S32 lengths 32,20 float32 prefill"
# `history` in a child where torch cannot be imported, as on a machine without it
NO_TORCH = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ImportError(f"torch is not installed here (import {name})")

sys.meta_path.insert(0, NoTorch())
from profiling.__main__ import main
code = main(sys.argv[1:])
assert not [m for m in sys.modules if m.split(".")[0] in ("torch", "attention")]
sys.exit(code)
"""


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """One model command with --store: its runs, newest first, and the store."""
    folder = tmp_path_factory.mktemp("cli")
    store = open_store(folder / "runs.sqlite")
    command = [sys.executable, "-m", "profiling", *MODEL, "--store", str(store.path),
               "--out", str(folder / "traces")]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    runs = query.list_runs(store)[0]
    return done, store, dict(zip(runs["variant"], runs["id"], strict=True))


def _without_torch(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_TORCH, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_the_model_command_keeps_each_implementation(kept):
    done, store, ids = kept
    assert sorted(ids) == ["eager", "kernels", "sdpa"]
    shown = ", ".join(ids[name] for name in ("eager", "sdpa", "kernels"))
    assert f"kept in the run store: {shown} (python -m profiling history show ID)" in done.stderr
    assert done.stdout.startswith("which attn_implementation?")  # stdout stays the tables
    listed = subprocess.run([sys.executable, "-m", "profiling", "history", "--store",
                             str(store.path), "list", "--shape", "tiny"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert "3 stored runs match" in listed.stdout and LABEL in listed.stdout


def test_history_shows_and_diffs_model_runs_without_torch(kept):
    _, store, ids = kept
    shown = _without_torch("history", "--store", str(store.path), "show", ids["sdpa"])
    assert shown.returncode == 0, shown.stderr
    for said in (f"sdpa · {LABEL} · CPU", "== which attn_implementation? ==",
                 "== the step, µs by category (they add up to the step) ==",
                 "== attention per decoder layer ==",
                 "sdpa: the trace shows SDPA's flash (CPU) backend ran"):  # fmt: skip
        assert said in shown.stdout, shown.stdout
    refused = _without_torch("history", "--store", str(store.path), "show", ids["kernels"])
    assert f"kernels · {LABEL}: unavailable — kernels: a kernels-hub" in refused.stdout
    diffed = _without_torch("history", "--store", str(store.path), "diff", ids["eager"],
                            ids["sdpa"])  # fmt: skip
    assert diffed.returncode == 0, diffed.stderr
    assert diffed.stdout.startswith(f"model sdpa · {ids['sdpa'][:6]} runs")
    assert "aten::scaled_dot_product_attention" in diffed.stdout


def test_no_store_keeps_nothing_and_the_environment_names_the_store(tmp_path, capsys):
    env_store = tmp_path / "env.sqlite"
    os.environ["ATTNPROF_STORE"], saved = str(env_store), os.environ["ATTNPROF_STORE"]
    try:
        assert main([*MODEL, "--attn", "sdpa", "--no-store", "--out", str(tmp_path / "a")]) == 0
        assert not env_store.exists() and "kept in the run store" not in capsys.readouterr().err
        assert main([*MODEL, "--attn", "sdpa", "--seq-lens", "16,32", "--lengths", "",
                     "--out", str(tmp_path / "b")]) == 0  # fmt: skip
        assert "kept in the run store" in capsys.readouterr().err
    finally:
        os.environ["ATTNPROF_STORE"] = saved
    runs = query.list_runs(open_store(env_store))[0]
    assert runs["kind"].tolist() == ["model-sweep"] * 2
    assert runs["shape"].tolist() == [f"tiny ×1 layers B2 S{n} float32 prefill" for n in (32, 16)]
