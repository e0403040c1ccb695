"""The C scanner's state is logged once by a server, not once per upload (issue 42: "C trace
scanner on" 20 times after 20 uploads, each read in a fresh worker process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
SMALL = ROOT / "tests" / "fixtures" / "naive_8_16_1024_64_bf16.json.gz"
SERVER = """
import logging, sys
logging.basicConfig(level=logging.INFO)
from profiling.views import upload_worker
for _ in range(3):
    page = upload_worker.run_upload("analyze", sys.argv[1])
    assert page is not None
"""


def test_three_uploads_log_the_scanners_state_once():
    done = subprocess.run(
        [sys.executable, "-c", SERVER, str(SMALL)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "C trace scanner" in line]
    assert len(said) == 1, said  # the server's own line; each worker's repeat is DEBUG
