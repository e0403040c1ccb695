"""The command line from any folder (issue 42: `python -m profiling` outside the repository
failed with "No module named profiling"): `pip install .` gives an `attention-profiler`
command, installed here into a fresh virtual environment from a copy of the package alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_an_installed_command_analyses_a_trace_from_another_folder(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source)
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    for package in ("profiling", "attention"):
        shutil.copytree(ROOT / package, source / package, ignore=skip)
    # the test environment's packages (its pip and setuptools too), none of this repository's
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True
    )
    install = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index",
               "--no-build-isolation", source]  # fmt: skip
    done = subprocess.run(install, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    trace = shutil.copy(conftest.NAIVE, elsewhere)
    ran = subprocess.run(
        [venv / "bin" / "attention-profiler", "analyze", Path(trace).name, "--top", "3"],
        capture_output=True, text=True, timeout=300, cwd=elsewhere,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "softmax_warp_forward" in ran.stdout  # the kernel table of the naive trace
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import profiling; print(profiling.__file__)"],
        capture_output=True, text=True, cwd=elsewhere, check=True,
    )  # fmt: skip
    assert str(venv) in where.stdout  # the installed copy ran, not this checkout
