"""README's set-up section: what a newcomer on a fresh machine needs, and nothing that drifts."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def set_up_section() -> str:
    return README.split("## Set up", 1)[1].split("\n## ", 1)[0]


def test_set_up_has_exactly_two_commands_and_ci_runs_the_second():
    blocks = re.findall(r"```bash\n(.*?)```", set_up_section(), re.S)
    assert [b.strip() for b in blocks] == [
        "pip install -r requirements.txt && python app.py",
        "pip install -r requirements-dev.txt && python -m pytest",
    ]
    ci_lines = [
        re.sub(r" -q\b", "", line) for line in (ROOT / ".ci" / "run").read_text().splitlines()
    ]
    assert blocks[1].strip() in ci_lines  # CI runs the README's command (quieter, same steps)


def test_set_up_names_the_python_version_the_project_requires():
    pyproject = (ROOT / "pyproject.toml").read_text()
    lowest = re.search(r'^requires-python = ">=([\d.]+)"', pyproject, re.M).group(1)
    assert f"Python {lowest} or newer" in set_up_section()


def test_set_up_says_how_to_get_the_cpu_build_of_torch_and_where_to_open_the_app():
    text = set_up_section()
    assert "python3 -m venv .venv" in text
    assert f"export PIP_EXTRA_INDEX_URL={CPU_INDEX}" in text
    assert "http://127.0.0.1:7860" in text
    # requirements.txt's own comment must not promise the CPU wheel from plain PyPI again
    comment = (ROOT / "requirements.txt").read_text().split("torch==", 1)[0]
    assert "PIP_EXTRA_INDEX_URL" in comment and "pip takes the CPU wheel" not in comment


def test_set_up_says_what_to_do_when_the_cpu_index_is_unreachable():
    """Issue 42: with PyTorch's CPU index unreachable pip retried for 9 min 40 s and failed,
    and the README did not say the index is optional."""
    text = " ".join(set_up_section().split())
    assert "That index is optional" in text
    assert "`unset PIP_EXTRA_INDEX_URL` and run the command again" in text
    assert "PyPI's torch runs on a CPU too" in text


def test_the_command_line_says_where_to_run_it_and_its_installed_name():
    section = " ".join(README.split("## Command line", 1)[1].split("\n## ", 1)[0].split())
    script = re.search(
        r"^(\S+) = \"profiling.__main__:main\"", (ROOT / "pyproject.toml").read_text(), re.M
    )
    assert script is not None  # pyproject's console script (tests/cli/test_installed.py runs it)
    assert "from the repository's folder" in section
    assert f"`pip install .` puts an `{script.group(1)}` command on the PATH" in section
