"""Issue 33's house rules, checked: no folder under profiling/ holds more than 15 Python
modules, and no test module is over 600 lines (a reader must find the door; a test module is
split by what it tests)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parents[1]
MOST_MODULES = 15
MOST_TEST_LINES = 600


def test_no_profiling_folder_holds_more_than_15_modules():
    crowded = {}
    for folder in [ROOT / "profiling", *(ROOT / "profiling").rglob("*/")]:
        if folder.name == "__pycache__" or not folder.is_dir():
            continue
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MOST_MODULES:
            crowded[str(folder.relative_to(ROOT))] = len(modules)
    assert not crowded, crowded


def test_no_test_module_is_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / "tests").rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MOST_TEST_LINES
    }
    assert not long, long
