"""The layers of docs/architecture.md, as import contracts (pyproject.toml's
[tool.importlinter]): each package of profiling/ imports only the layers below it, the variants
never import profiling, the analyses and trace reading never import torch, only the page imports
gradio, and plotly only where figures are built. `lint-imports` checks them; a broken contract
fails the suite (and so CI)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    command = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    done = subprocess.run(
        [command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "KEPT" in done.stdout
