"""CI requires the browser tests (issue 17): `.ci/run` fails where Chromium cannot be installed
and sets ATTNPROF_REQUIRE_BROWSER=1, under which the browser tests fail instead of skipping
when Chromium or playwright is missing; without the variable a developer's machine still skips.

Each case runs in a child: pytest collecting only the browser module (without conftest, whose
torch import the check does not need), or `.ci/run` with stand-in tools on its PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import collect_in_child, workers_here

ROOT = Path(__file__).resolve().parents[1]
CI_RUN = ROOT / ".ci" / "run"
REQUIRE = "ATTNPROF_REQUIRE_BROWSER"
SCANNER = "ATTNPROF_REQUIRE_SCANNER"


def collect_browser_tests(required: bool, **env_changes: str) -> str:
    """Collect tests/page/test_browser.py in a child pytest; check that it failed (required) or
    skipped the module (not required), and return its output."""
    env = {key: value for key, value in os.environ.items() if key != REQUIRE}
    env.update(env_changes, **({REQUIRE: "1"} if required else {}))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "--noconftest",
         "-p", "no:cacheprovider", "tests/page/test_browser.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    output = done.stdout + done.stderr
    if required:  # 5 is pytest's "nothing collected", what the skip gives
        assert done.returncode not in (0, 5), output
        assert "ERROR tests/page/test_browser.py" in output and f"{REQUIRE}=1 requires" in output
    else:
        assert done.returncode == 5 and "SKIPPED" in output, output
    return output


@pytest.mark.parametrize("required", [True, False])
def test_missing_chromium_fails_only_where_the_browser_is_required(required):
    output = collect_browser_tests(required, CHROMIUM="/nonexistent")
    assert "/nonexistent is missing: apt-get install chromium" in output, output


@pytest.mark.parametrize("required", [True, False])
def test_missing_playwright_fails_only_where_the_browser_is_required(tmp_path, required):
    broken = tmp_path / "playwright"  # shadows the installed package, as if it were absent
    broken.mkdir()
    (broken / "__init__.py").write_text('raise ImportError("no playwright here")\n')
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    output = collect_browser_tests(required, CHROMIUM=sys.executable, PYTHONPATH=path)
    assert "playwright is not installed" in output, output


def run_ci(folder: Path, **tools: str) -> tuple[int, str]:
    """Run `.ci/run` with a PATH holding only `dirname` and the given stand-in tools (each a
    /bin/sh script body); its exit code and output."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "dirname").symlink_to(shutil.which("dirname"))
    for name, body in tools.items():
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    done = subprocess.run(
        [shutil.which("bash"), str(CI_RUN)], env={"PATH": str(bin_dir)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("apt_get", ["exit 100", "exit 0"])  # fails, or installs nothing
@pytest.mark.parametrize("missing", ["chromium", "clang"])
def test_ci_fails_where_chromium_or_clang_cannot_be_installed(tmp_path, apt_get, missing):
    ran = tmp_path / "pip-ran"
    present = {tool: "exit 0" for tool in ("chromium", "clang") if tool != missing}
    rc, output = run_ci(
        tmp_path, **present, **{"apt-get": apt_get, "pip": f"touch {ran}", "python": "exit 0"}
    )
    assert rc == 1 and f"{missing} could not be installed" in output, output
    assert not ran.exists()  # it stops before the test command


def test_ci_runs_the_tests_with_the_browser_and_the_scanner_required(tmp_path):
    rc, output = run_ci(
        tmp_path, chromium="exit 0", clang="exit 0", pip="exit 0",
        python=f'echo "{REQUIRE}=${REQUIRE} {SCANNER}=${SCANNER} CHROMIUM=$CHROMIUM args: $*"',
    )  # fmt: skip
    assert rc == 0, output
    assert f"{REQUIRE}=1 {SCANNER}=1 CHROMIUM={tmp_path}/bin/chromium args: -m pytest -q" in output


@pytest.mark.parametrize("required", [True, False])
def test_a_scanner_that_does_not_load_fails_only_where_it_is_required(required):
    """ATTNPROF_SCANNER=off stands for a profiling/trace/scan.c that no longer compiles: both leave
    scanner() None (docs/testing.md shows the broken file failing the suite the same way)."""
    env = {key: value for key, value in os.environ.items() if key != SCANNER}
    env.update(ATTNPROF_SCANNER="off", **({SCANNER: "1"} if required else {}))
    returncode, output = collect_in_child("tests/trace/test_trace_scan.py", env)
    if required:
        assert returncode not in (0, 5), output
        assert (
            "ERROR tests/trace/test_trace_scan.py" in output and f"{SCANNER}=1 requires" in output
        )
    else:
        assert returncode == 5 and "SKIPPED" in output, output


def test_two_workers_on_a_cpu_machine_and_one_process_beside_a_gpu(monkeypatch):
    """The suite's time budget (20 min on two cores) holds with two workers; a GPU test must
    never share its card with another test's kernels."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert workers_here() == 2
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert workers_here() == 0
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert workers_here() == 0


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI's machine: two cores, no GPU")
def test_ci_runs_this_suite_on_workers():
    assert workers_here() == 2 and os.environ.get("PYTEST_XDIST_WORKER"), "one process in CI"
