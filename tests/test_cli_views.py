"""`python -m profiling compare|diff|sweep|analyze`, in process and once as a user types it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from profiling.__main__ import main
from tests import conftest

ROOT = Path(__file__).resolve().parents[1]
NAIVE, FLASH = str(conftest.NAIVE), str(conftest.FLASH)
SMALL = ["--batch", "1", "--heads", "2", "--head-dim", "32", "--dtype", "float32"]


def test_compare_prints_the_glance_table_and_writes_the_zip(tmp_path, capsys):
    rc = main(["compare", "--variants", "naive,sdpa-cudnn", "--seq-len", "64", *SMALL,
               "--device", "cpu", "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0
    assert "== compare on CPU" in out.out and "B1 H2 S64 D32 float32 causal" in out.out
    assert "naive" in out.out and "eager" in out.out
    assert "sdpa-cudnn (unavailable): sdpa-cudnn is unavailable here" in out.out
    assert "naive (1/2)" in out.err  # progress per variant on stderr
    zips = list(tmp_path.glob("compare_*.zip"))
    assert len(zips) == 1 and "glance.csv" in zipfile.ZipFile(zips[0]).namelist()
    assert (tmp_path / "naive" / "naive_1_2_64_32_float32_causal_cpu_3steps.json.gz").exists()


def test_a_compare_where_nothing_ran_still_keeps_its_zip_and_never_overwrites(tmp_path, capsys):
    """--out need not exist; a second job at the same shape gets its own zip; --markdown
    prints a header-only table when no row ran; the zip's temp folder goes."""
    out = tmp_path / "new" / "folder"
    argv = ["compare", "--variants", "sdpa-cudnn", "--seq-len", "64", *SMALL, "--device", "cpu",
            "--out", str(out), "--markdown"]  # fmt: skip
    assert main(argv) == 1  # nothing ran: 1, not a crash
    printed = capsys.readouterr().out
    assert "| variant | kernels/fwd |" in printed and "(empty)" not in printed
    assert main(argv) == 1
    second = out / "compare_1_2_64_32_float32_causal_cpu_3steps-2.zip"
    assert {p.name for p in out.glob("compare_*.zip")} == {second.name, second.name[:-6] + ".zip"}
    made = [ln.split("zip: ", 1)[1] for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("zip: ")]  # fmt: skip
    assert made == [str(second)]


def test_diff_reads_the_memcpy_off(capsys):
    assert main(["diff", NAIVE, FLASH, "--label-a", "naive", "--label-b", "flash"]) == 0
    out = capsys.readouterr().out
    assert "(3 attn_fwd spans, per forward)" in out and "deltas are flash − naive" in out
    assert "warning" not in out
    line = next(ln for ln in out.splitlines() if "Memcpy DtoD" in ln)
    assert line.split()[:6] == ["Memcpy", "DtoD", "memcpy", "only", "naive", "1"]
    assert "== operators ==" in out and "aten::_scaled_dot_product_flash_attention" in out


def test_diff_markdown_and_totals(capsys):
    assert main(["diff", NAIVE, NAIVE, "--totals", "--markdown", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "(3 attn_fwd spans, in total)" in out
    assert "| kernel | category | where | count A | count B | Δ count (B − A) |" in out


def test_sweep_prints_every_point(tmp_path, capsys):
    rc = main(["sweep", "--variants", "naive,sdpa-efficient", "--seq-lens", "64,128", *SMALL,
               "--device", "cpu", "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    rows = [ln.split()[:3] for ln in out.splitlines() if ln.split()[:1] in (["naive"],
            ["sdpa-efficient"])]  # fmt: skip
    assert rows == [["naive", "64", "ok"], ["naive", "128", "ok"],
                    ["sdpa-efficient", "64", "unavailable"], ["sdpa-efficient", "128",
                    "unavailable"]]  # fmt: skip
    assert len(list(tmp_path.glob("sweep_*.zip"))) == 1


def test_analyze_prints_summary_and_tables(capsys):
    assert main(["analyze", NAIVE, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "GPU busy  99.1%" in out
    assert "== operators" in out and "== kernels (per forward" in out and "== launches" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["diff", NAIVE], "required"),
        (["diff", NAIVE, "/nonexistent.json"], "cannot open trace"),
        (["analyze", str(ROOT / "README.md")], "not valid JSON"),
        (["sweep", "--variants", "nope"], "unknown variant"),
        (["sweep", "--variants", "naive", "--seq-lens", "64,x"], "comma-separated"),
        (["sweep", "--variants", "naive", "--seq-lens", "8", "--device", "cpu"], "seq_len must"),
        (["compare", "--seq-len", "abc"], "invalid int"),
        (["compare", "--head-dim", "60", "--device", "cpu"], "multiple of 8"),
    ],
)
def test_bad_arguments_one_line_exit_2(argv, says, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own checks exit; ours return 2
        rc = exc.code
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1 and err[0].startswith("error:") and says in err[0]


def test_entry_point_dispatches_subcommands():
    p = subprocess.run(
        [sys.executable, "-m", "profiling", "analyze", NAIVE, "--top", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "dominant kernel" in p.stdout
