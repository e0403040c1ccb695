"""docs/architecture.md names the repository's folders and modules: each path it names must exist,
so the map cannot drift from the tree (a renamed module fails here, not in a reader's hands)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a path from the repository root: a top-level folder, then names; `<name>` stands for any
PATH = re.compile(r"(?<![\w/.])((?:app|attention|profiling|tests|benchmarks|docs|\.ci)/[\w./<>-]*"
                  r"|app\.py|pyproject\.toml)")  # fmt: skip


def named_paths(text: str) -> list[str]:
    """The paths `text` names, a template with <…> left out."""
    paths = (match.rstrip(".") for match in PATH.findall(text))
    return sorted({path for path in paths if "<" not in path})


def test_every_path_the_architecture_names_exists():
    named = named_paths((ROOT / "docs" / "architecture.md").read_text())
    assert len(named) > 40, named  # the map names the packages, their modules and the tests
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
