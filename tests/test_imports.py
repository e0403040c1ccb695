"""Trace analysis runs without torch (issue 18, point 4).

Reading an uploaded trace (Analyse, Diff) and a run's own trace must not need torch or the
`attention/` package, which imports it: a machine that only reads traces can skip the
multi-GB install, and the analyses cannot grow a hidden dependency on a variant's code.
The check runs in a child process, since this one (and conftest) has torch loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
GPU_TRACE = FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
OTHER_GPU_TRACE = FIXTURES / "naive_8_16_1024_64_bf16.json.gz"

# The trace, analysis, kernels and gantt packages are held torch-free by the import contract
# (pyproject.toml, tests/test_layers.py); these are the modules above them that must still
# start without torch, which a layer contract cannot say: the run's own trace readers, the CLI's
# analyze | diff, the upload worker and the views they read.
TORCH_FREE = [
    "profiling.run.records",
    "profiling.run.gantt_records",
    "profiling.run.trace",
    "profiling.run.clocks",  # the NVML sampler
    "profiling.text_tables",
    "profiling.jobs.files",
    "profiling.views.text.summary",
    "profiling.views.text.timing",
    "profiling.views.roofline_figure",
    "profiling.cli.flags",
    "profiling.cli.commands",
    "profiling.__main__",  # `python -m profiling analyze | diff` start without torch
    "profiling.views.uploads",  # and the Analyse and Diff views they and the page read
    "profiling.views.analyze",
    "profiling.views.diff",
    "profiling.views.upload_worker",  # the process that reads an upload imports no torch
    # issue 34: the run store is written from plain data and read without torch (a laptop
    # reads an H200's exported runs), and so are History's views and `history` commands
    "profiling.store",
    "profiling.store.hooks",
    "profiling.store.exchange",
    "profiling.store.trend",
    "profiling.views.history",
    "profiling.cli.history",
    # issue 43: a stored model run is read back (and its trace drawn, in the upload worker)
    # without torch, as the variants' are
    "profiling.store.model_summary",
    "profiling.views.model.stored",
    # issue 36: an ncu report is read, joined and shown where no torch is
    "profiling.analysis.counters",
    "profiling.analysis.counters_join",
    "profiling.run.counters",
    "profiling.views.counters",
]

# A finder placed first on sys.meta_path makes any `import torch` (or torch.x) raise, as on a
# machine without torch; the child then imports one module and uses the analyses on traces.
CHILD = """
import importlib, sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ImportError(f"torch is not installed here (import {{name}})")

sys.meta_path.insert(0, NoTorch())
importlib.import_module({module!r})
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "attention"))
assert not loaded, f"{module} loaded {{loaded[:5]}}"
{use}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "attention"))
assert not loaded, f"using the analyses loaded {{loaded[:5]}}"
"""

# What the Analyse and Diff tabs and a run's summary do with a trace, torch-free.
USE = f"""
from profiling.analysis import analyze
from profiling.analysis import diff
from profiling.gantt import spec as gantt
from profiling.run import gantt_records
from profiling.run import trace as run_trace
from profiling.run import records as small_trace
result = analyze.analyze({str(GPU_TRACE)!r})
assert result.has_gpu and not result.kernels.empty and result.launch is not None
assert result.stats.backend == "math", result.stats.backend
gantt.gantt_spec(result.spans, result.lanes)
kernels, operators = diff.diff({str(GPU_TRACE)!r}, {str(OTHER_GPU_TRACE)!r})
assert not kernels.empty and not operators.empty
small = small_trace.read({str(GPU_TRACE)!r})
windows, work = small_trace.forward_work(small)
assert small_trace.per_forward(small, windows, work).backend == "math"
assert not small_trace.kernel_table(work, per=len(windows)).empty
assert gantt_records.gantt(small).data
assert run_trace.read({str(GPU_TRACE)!r}).launch_stats().launches
"""


def run_child(module: str, use: str = "") -> subprocess.CompletedProcess[str]:
    code = CHILD.format(module=module, use=use)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_imports_without_torch_or_attention(module: str):
    done = run_child(module)
    assert done.returncode == 0, done.stderr[-2000:]


def test_analyses_run_on_traces_without_torch():
    done = run_child("profiling.analysis.analyze", USE)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["analyze", str(GPU_TRACE)], "kernels by role"),
        (["diff", str(GPU_TRACE), str(OTHER_GPU_TRACE)], "operators"),
    ],
)
def test_the_analyze_and_diff_commands_run_without_torch(command, said):
    """`diff` once imported torch through its views (~3–6 s before a trace was read)."""
    use = f"""
import contextlib, io
from profiling.__main__ import main
with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
    assert main({command!r}) == 0
assert {said!r} in out.getvalue()
"""
    done = run_child("profiling.__main__", use)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_child_does_fail_when_torch_is_imported():
    """The blocker itself works: a module that needs torch is refused in the child."""
    done = run_child("attention.sdpa")
    assert done.returncode != 0
    assert "torch is not installed here" in done.stderr


def test_the_history_commands_run_without_torch(tmp_path):
    """Issue 34: a machine without torch lists, shows, compares, diffs and exports stored runs
    (an H200's export read on a laptop); issue 41: and each says what it should, not just
    something (a second run twice as slow, of another trace)."""
    store = tmp_path / "runs.sqlite"
    use = f"""
import contextlib, io
from profiling.__main__ import main
from profiling.store import open_store
from profiling.store.write import record
from tests.store.store_helpers import OTHER_TRACE, run_data

store = open_store({str(store)!r})
ids = [record(store, run_data()).run_id,
       record(store, run_data(trace=OTHER_TRACE, gpu_us=1000.0)).run_id]
said = {{}}
for command in (["list"], ["show", ids[0]], ["compare", *ids], ["diff", *ids], ["trend", ids[1]],
                ["export", {str(tmp_path / "out.parquet")!r}]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["history", "--store", {str(store)!r}, *command]) == 0, command
    said[command[0]] = out.getvalue()
assert all(i in said["list"] for i in ids) and "2 stored runs match" in said["list"]
assert ids[0] in said["show"] and ids[1] not in said["show"]
rows = {{line.split()[0]: line.split() for line in said["compare"].splitlines()[1:]}}
for run_id, gpu_us, times_first in ((ids[0], "500", "1"), (ids[1], "1,000", "2")):
    row = rows[run_id]
    assert row[row.index("ok") + 1] == gpu_us and row[row.index("80") + 1] == times_first, row
a, b = (f"sdpa-math · {{i[:6]}}" for i in ids)
assert f"{{b}} runs 13 fewer GPU operations per forward than {{a}}" in said["diff"], said["diff"]
assert "== kernels ==" in said["diff"]
trend = {{line.split()[0]: line.split()[-1] for line in said["trend"].splitlines()[1:3]}}
assert trend == {{ids[0]: "no", ids[1]: "regression"}}, said["trend"]
assert "rule: A run is flagged as a regression" in said["trend"]
"""
    done = run_child("profiling.__main__", use)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out.parquet").is_file()
