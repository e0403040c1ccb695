"""`python -m profiling` end to end, as a user types it."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "profiling", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_writes_trace_and_table_named_by_tag(tmp_path):
    out = tmp_path / "traces"
    p = cli(
        "--variant",
        "naive",
        "--seq-len",
        "128",
        "--batch",
        "1",
        "--heads",
        "2",
        "--head-dim",
        "32",
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    tag = "naive_1_2_128_32_float32_causal_cpu_3steps"
    gz, txt = out / "naive" / f"{tag}.json.gz", out / "naive" / f"{tag}.txt"
    assert gz.exists() and txt.exists()
    events = json.loads(gzip.decompress(gz.read_bytes()))["traceEvents"]
    assert sum(e.get("name") == "attn_fwd" for e in events) == 3
    assert "CPU µs / forward" in p.stdout and "attn_fwd" in p.stdout


def test_all_reports_unavailable_variants(tmp_path):
    p = cli(
        "--variant",
        "all",
        "--seq-len",
        "64",
        "--batch",
        "1",
        "--heads",
        "1",
        "--head-dim",
        "16",
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--no-causal",
        "--out",
        str(tmp_path),
    )
    assert p.returncode == 0, p.stderr
    assert "sdpa-cudnn: unavailable" in p.stdout and "needs a CUDA GPU" in p.stdout
    assert (tmp_path / "sdpa-math" / "sdpa-math_1_1_64_16_float32_full_cpu_3steps.json.gz").exists()
    assert "== 12 variants on cpu ==" in p.stdout


def test_bad_arguments_one_line_exit_2():
    for args in (
        ["--variant", "nope"],
        ["--variant", "naive", "--seq-len", "abc"],
        ["--variant", "naive", "--head-dim", "60"],
        [],
    ):
        p = cli(*args)
        assert p.returncode == 2, args
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
