"""Issue 41: the HTA cross-check (test_hta_crosscheck.py) skipped wherever HTA did not import,
CI included, so a broken install hid it. Under ATTNPROF_REQUIRE_HTA=1 (which `.ci/run` sets) it
fails instead; without it a developer's machine still skips. Each case collects the module in
a child pytest with a stand-in `hta` package that cannot be imported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import collect_in_child

ROOT = Path(__file__).resolve().parents[2]
REQUIRE = "ATTNPROF_REQUIRE_HTA"


@pytest.mark.parametrize("required", [True, False])
def test_a_missing_hta_fails_only_where_it_is_required(tmp_path, required):
    broken = tmp_path / "hta"  # shadows the installed package, as if it were absent
    broken.mkdir()
    (broken / "__init__.py").write_text('raise ImportError("no hta here")\n')
    env = {key: value for key, value in os.environ.items() if key != REQUIRE}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), str(ROOT)]))
    if required:
        env[REQUIRE] = "1"
    returncode, output = collect_in_child("tests/analysis/test_hta_crosscheck.py", env)
    if required:
        assert returncode not in (0, 5), output
        assert f"{REQUIRE}=1 requires HTA for the cross-check (no hta here)" in output, output
    else:
        assert returncode == 5 and "SKIPPED" in output, output


def test_ci_requires_the_hta_cross_check():
    assert f"export {REQUIRE}=1" in (ROOT / ".ci" / "run").read_text()
