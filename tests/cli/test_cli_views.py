"""`python -m profiling compare|diff|sweep|analyze`, in process and once as a user types it."""

from __future__ import annotations

import gzip
import itertools
import os
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from profiling.__main__ import main
from tests import conftest

ROOT = Path(__file__).resolve().parents[2]
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
    head, tables = out.split("== kernels ==")
    assert "flash runs 6 fewer GPU operations per forward than naive (7 → 1" in head  # headline
    line = next(ln for ln in tables.splitlines() if "Memcpy DtoD" in ln)
    assert line.split()[:6] == ["Memcpy", "DtoD", "memcpy", "only", "naive", "1"]
    assert "== operators ==" in out and "aten::_scaled_dot_product_flash_attention" in out


def test_diff_markdown_and_totals(capsys):
    assert main(["diff", NAIVE, NAIVE, "--totals", "--markdown", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "(3 attn_fwd spans, in total)" in out
    assert "| kernel | category | where | count A | count B | Δ count (B − A) |" in out


def test_diff_prints_plain_text_in_the_readme_example(capsys, monkeypatch):
    """The README's `diff` runs as written from the repository's root, and its headline is plain
    text (the API's too): `sm80_xmma_gemm`, not Markdown's `sm80\\_xmma\\_gemm`."""
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^python -m profiling diff (.+?)#", readme, re.M | re.S).group(1)
    monkeypatch.chdir(ROOT)
    assert main(["diff", *shlex.split(command.replace("\\\n", " "))]) == 0
    out = capsys.readouterr().out
    assert "in-place has 1 fewer Memcpy DtoD per forward (−126.5 µs)" in out
    assert "calls added, removed or made a different number of times first" in out
    math = str(ROOT / "tests/fixtures/h200_sdpa-math_8_16_1024_64_bf16.json.gz")
    assert main(["diff", NAIVE, math, "--label-a", "naive_bf16"]) == 0
    out = capsys.readouterr().out
    head = out.split("== kernels ==")[0]
    assert "naive_bf16 (7 → 20" in head and "1 more sm80_xmma_gemm_f32f32" in head
    assert "\\" not in out


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


def test_analyze_heads_an_uploads_role_totals_as_totals(capsys):
    """No attn_fwd spans: the role table holds the whole trace's totals, headed so."""
    assert main(["analyze", str(ROOT / "tests/fixtures/shapes/shape_cuda-graph.json.gz")]) == 0
    roles = capsys.readouterr().out.split("== kernels by role")[1]
    assert "µs (whole trace)" in roles and "/ step" not in roles


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


# -- audit of the command line: each test below failed before its fix ---------------------------


def _one_error(capsys) -> str:
    """The single `error:` line on stderr (argparse exits, our checks return 2)."""
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("command", ["compare", "sweep"])
@pytest.mark.parametrize("bad", ["file", "/sys/x"])
def test_a_bad_out_is_one_line_before_any_run(command, bad, tmp_path, capsys, monkeypatch):
    """An existing file or an unwritable folder as --out: one line, exit 2, no temp folder left."""
    out = tmp_path / "a-file" if bad == "file" else Path(bad)
    if bad == "file":
        out.write_text("not a folder")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where attnprof-zip-* would be left
    lengths = ["--seq-len", "64"] if command == "compare" else ["--seq-lens", "64"]
    argv = [command, "--variants", "naive", *lengths, *SMALL, "--device", "cpu", "--out", str(out)]
    assert _exit_code(argv) == 2
    line = _one_error(capsys)
    assert line.startswith(f"error: cannot write to --out '{out}': ")
    assert not any(temp.iterdir())


def test_the_out_check_leaves_no_folder_when_the_shape_is_refused(tmp_path, capsys):
    out = tmp_path / "new" / "folder"
    argv = ["compare", "--variants", "naive", "--head-dim", "60", "--device", "cpu"]
    assert main([*argv, "--out", str(out)]) == 2
    assert "multiple of 8" in _one_error(capsys) and not (tmp_path / "new").exists()


def test_keep_zip_removes_its_temp_folder_even_when_the_move_fails(tmp_path, monkeypatch):
    import shutil

    from profiling.cli.commands import keep_zip

    made = tmp_path / "attnprof-zip-x" / "compare.zip"
    made.parent.mkdir()
    made.write_bytes(b"zip")

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "move", refuse)
    with pytest.raises(OSError):
        keep_zip(made, tmp_path / "out")
    assert not made.parent.exists()


NOT_A_FILE = "not a regular file (a pipe, device or folder); give a trace file's path"


@pytest.mark.parametrize("command", ["diff", "analyze"])
def test_a_path_that_is_not_a_regular_file_is_refused_by_name(command, capsys):
    argv = ["diff", NAIVE, "/dev/null"] if command == "diff" else ["analyze", "/dev/null"]
    assert main(argv) == 2
    assert _one_error(capsys) == f"error: /dev/null: {NOT_A_FILE}"


def test_diff_from_a_pipe_is_refused_not_a_traceback():
    p = subprocess.run(
        [sys.executable, "-m", "profiling", "diff", NAIVE, "/dev/stdin"],
        cwd=ROOT, input="", capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert p.returncode == 2
    assert p.stderr == f"error: /dev/stdin: {NOT_A_FILE}\n"


def test_analyze_passes_max_mib_for_the_file_and_its_expansion(monkeypatch, capsys):
    import profiling.analysis.analyze

    seen = {}
    real = profiling.analysis.analyze.analyze

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(profiling.analysis.analyze, "analyze", spy)
    assert main(["analyze", NAIVE, "--max-mib", "2048", "--top", "1"]) == 0
    assert seen["max_upload_bytes"] == seen["max_expanded_bytes"] == 2048 * 1024**2


def test_analyze_limits_speak_of_max_mib_not_uploads(tmp_path, capsys):
    big = tmp_path / "big.json"
    big.write_bytes(b'{"traceEvents": []}' + b" " * 2 * 1024**2)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(big.read_bytes()))
    assert main(["analyze", str(big), "--max-mib", "1"]) == 2
    line = _one_error(capsys)
    assert line.startswith(f"error: {big}: the file is 2 MiB; the limit is --max-mib 1 MiB")
    assert "--max-mib" in line and "upload" not in line
    assert main(["analyze", str(bomb), "--max-mib", "1"]) == 2
    line = _one_error(capsys)
    assert line.startswith(f"error: {bomb}: the trace expands to more than 1 MiB of JSON")
    assert "--max-mib" in line and "upload" not in line


@pytest.mark.parametrize("argv", [["analyze", NAIVE, "--max-mib", "0"],
                                  ["analyze", NAIVE, "--top", "-3"],
                                  ["analyze", NAIVE, "--top", "0"],
                                  ["diff", NAIVE, FLASH, "--top", "0"]])  # fmt: skip
def test_counts_must_be_at_least_one(argv, capsys):
    assert _exit_code(argv) == 2
    assert "must be an integer ≥ 1" in _one_error(capsys)


@pytest.mark.parametrize("typo", ["compar", "analyse-it", "--variant"])
def test_a_misspelled_command_is_named(typo, capsys):
    if typo.startswith("-"):  # the profile command keeps its own error
        assert _exit_code([typo]) == 2
        assert "--variant" in _one_error(capsys)
        return
    assert main([typo, NAIVE]) == 2
    assert _one_error(capsys) == (
        f"error: unknown command '{typo}'; choose from: "
        "compare, diff, sweep, analyze, history, model"
    )


def test_analyse_is_analyze_and_the_help_lists_the_commands(capsys):
    assert main(["analyse", NAIVE, "--top", "1"]) == 0
    capsys.readouterr()
    assert _exit_code(["--help"]) == 0
    help_text = capsys.readouterr().out
    assert all(f"\n  {c} " in help_text for c in ("compare", "diff", "sweep", "analyze"))


def test_markdown_headers_are_escaped_like_cells(capsys):
    assert main(["diff", NAIVE, FLASH, "--label-a", "a|b", "--markdown", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "| count a\\|b |" in out
    runs = itertools.groupby(out.splitlines(), key=lambda ln: ln.startswith("|"))
    tables = [list(rows) for is_table, rows in runs if is_table]
    assert len(tables) == 3  # kernels, operators, and the two aligned by role
    for rows in tables:  # header, rule and rows: as many cells each
        assert len({len(re.split(r"(?<!\\)\|", row)) for row in rows}) == 1, rows


@pytest.mark.parametrize(("labels", "says"), [(["--label-a", "B"], "must differ"),
                                              (["--label-a", "x", "--label-b", "x"], "must differ"),
                                              (["--label-a", "a\nb"], "one line")])  # fmt: skip
def test_diff_labels_that_break_the_tables_are_refused(labels, says, capsys):
    assert main(["diff", NAIVE, FLASH, *labels]) == 2
    assert says in _one_error(capsys)


def test_trace_errors_name_the_file(capsys):
    readme = str(ROOT / "README.md")
    assert main(["diff", NAIVE, readme]) == 2
    assert _one_error(capsys).startswith(f"error: {readme}: not valid JSON")


@pytest.mark.parametrize("argv", [["sweep", "--variants", "naive", "--seq-len", "1024"],
                                  ["compare", "--seq", "64"]])  # fmt: skip
def test_no_abbreviated_flags(argv, capsys):
    assert _exit_code([*argv, "--head-dim", "60", "--device", "cpu"]) == 2
    assert "unrecognized arguments" in _one_error(capsys)


def test_a_closed_pipe_ends_quietly():
    """`... | head -1`: the reader is gone before the first write; no BrokenPipeError trace."""
    read, write = os.pipe()
    os.close(read)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "profiling", "analyze", NAIVE],
            cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=300,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
    finally:
        os.close(write)
    assert p.returncode == 1 and p.stderr == ""


def test_a_name_with_a_tab_or_newline_stays_on_its_line_and_counts_read_as_counts(tmp_path, capsys):
    """Issue 31: a control character in a kernel's name broke the summary line and the table
    rows; whole counts printed as '5.00'."""
    import json

    doc = json.loads(gzip.decompress(Path(NAIVE).read_bytes()))
    odd = "elementwise\tkernel\nmasked\x1b[31m"
    for event in doc["traceEvents"]:
        if event.get("name", "").startswith("void at::native::elementwise_kernel"):
            event["name"] = odd
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    assert main(["analyze", str(path), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "\t" not in out and "\x1b" not in out  # no raw control character
    dominant = next(line for line in out.splitlines() if "dominant kernel" in line)
    assert "elementwise\\tkernel\\nmasked\\x1b[31m" in dominant
    summary = out.split("\n\n== ")[0].splitlines()
    assert all(re.match(r"^ *[a-zA-Z/µ →−]+  \S", line) for line in summary), summary
    assert "kernels / forward  5 (+ 1 memcpy, 1 memset)" in out


@pytest.mark.parametrize("label", ["ранг 0", "第一", "é-run", "rank 0"])
def test_a_label_in_any_script_names_the_columns(label, capsys):
    """Issue 31: 'ранг 0' was refused; letters and digits of any script are plain text."""
    from profiling.views.diff import diff_label

    assert diff_label(f" {label} ", "A") == label
    assert main(["diff", NAIVE, FLASH, "--label-a", label, "--top", "2"]) == 0
    assert f"count {label}" in capsys.readouterr().out


@pytest.mark.parametrize("label", ["a\tb", "a\u202eb", "<b>x</b>", "`x`", "a\u200bb", "*x*"])
def test_a_label_with_markup_or_control_characters_is_refused(label):
    from profiling.user_values import ConfigError
    from profiling.views.diff import diff_label

    with pytest.raises(ConfigError, match="letters and digits"):
        diff_label(label, "A")
