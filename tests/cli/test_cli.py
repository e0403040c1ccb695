"""`python -m profiling` end to end, as a user types it."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
    assert "sdpa-cudnn: unavailable — SDPA cuDNN needs a CUDA GPU" in p.stdout
    assert "sdpa-cudnn is unavailable" not in p.stdout  # the id once per line
    assert (tmp_path / "sdpa-math" / "sdpa-math_1_1_64_16_float32_full_cpu_3steps.json.gz").exists()
    assert "== 12 variants on cpu ==" in p.stdout
    overview = p.stdout.split("== 12 variants on cpu ==")[1]
    naive = next(ln for ln in overview.splitlines() if ln.startswith("naive "))
    assert "kernels/fwd   n/a  GPU µs       n/a" in naive  # a CPU run has no kernels, not 0.00


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


TINY = ["--seq-len", "128", "--batch", "1", "--heads", "2", "--head-dim", "32",
        "--dtype", "float32", "--device", "cpu"]  # fmt: skip


def _run(argv: list[str], capsys) -> tuple[int, str, list[str]]:
    """main() in process: exit code, stdout, the non-empty stderr lines."""
    from profiling.__main__ import main

    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, [ln for ln in out.err.splitlines() if ln.strip()]


def test_a_bad_out_is_one_line_exit_2(tmp_path, capsys):
    """An existing file or an unwritable folder as --out is refused before the run, not a trace."""
    afile = tmp_path / "a-file"
    afile.write_text("")
    for out, reason in ((afile, "not a folder"), (Path("/sys/x"), "")):
        rc, stdout, err = _run(["--variant", "naive", *TINY, "--out", str(out)], capsys)
        assert rc == 2 and stdout == ""
        assert len(err) == 1 and err[0].startswith(f"error: cannot write to --out '{out}': ")
        assert reason in err[0]


def test_one_variant_that_cannot_run_is_an_error_on_stderr(tmp_path, capsys):
    """Unavailable: exit 1; refused by the memory estimate (a ConfigError): exit 2; both one
    `error:` line on stderr that names the variant once."""
    rc, stdout, err = _run(["--variant", "sdpa-cudnn", *TINY, "--out", str(tmp_path)], capsys)
    assert rc == 1 and stdout == ""
    assert err == ["error: sdpa-cudnn is unavailable here: SDPA cuDNN needs a CUDA GPU "
                   "(this run is on cpu)"]  # fmt: skip
    huge = ["--seq-len", "131072", "--batch", "8", "--heads", "16", "--head-dim", "16"]
    rc, stdout, err = _run(["--variant", "naive", *huge, "--device", "cpu",
                            "--out", str(tmp_path)], capsys)  # fmt: skip
    assert rc == 2 and stdout == ""
    assert len(err) == 1 and err[0].startswith("error: naive at B8 H16 S131072") and "GiB" in err[0]


def test_the_profile_flags_are_not_abbreviated():
    from profiling.__main__ import parser

    with pytest.raises(SystemExit):
        parser().parse_args(["--var", "naive"])


def test_help_states_the_limits_and_defaults():
    p = cli("--help")
    text = " ".join(p.stdout.split())
    for said in ("16–131072 (default 1024)", "1–64 (default 8)", "1–128 (default 16)",
                 "16–256, a multiple of 8 (default 64)", "1–50 (default 3)"):  # fmt: skip
        assert said in text, said


def test_all_lists_a_broken_variant_as_failed_not_unavailable(
    monkeypatch, request, tmp_path, capsys
):
    """`--variant all` goes on past a variant whose build or warm-up raises, lists it as failed
    with the error's class (exit 1), and a variant a rule refuses as unavailable."""
    from attention import VARIANTS
    from tests.run.test_runner import install_variant

    def no_module(problem):
        raise ImportError("no module named 'triton_kernels'")

    def illegal_access(q, k, v):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    registry = dict(VARIANTS)  # put back in its order: the pickers and Compare's defaults follow it
    request.addfinalizer(lambda: (VARIANTS.clear(), VARIANTS.update(registry)))
    for vid in [v for v in VARIANTS if v not in ("naive", "sdpa-cudnn")]:
        monkeypatch.delitem(VARIANTS, vid)  # a short `all`
    install_variant(monkeypatch, "broken-build", build=no_module)
    install_variant(monkeypatch, "broken-forward", forward=illegal_access)
    rc, stdout, err = _run(["--variant", "all", *TINY, "--out", str(tmp_path)], capsys)
    assert rc == 1
    overview = stdout.split("== 4 variants on cpu ==")[1].splitlines()
    lines = {line.split()[0]: " ".join(line.split()[1:]) for line in overview if line.strip()}
    assert lines["broken-build"] == "failed: ImportError: no module named 'triton_kernels'"
    assert lines["broken-forward"] == (
        "failed: RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert lines["sdpa-cudnn"] == "unavailable: SDPA cuDNN needs a CUDA GPU (this run is on cpu)"
    assert lines["naive"].startswith("kernels/fwd")
    assert "broken-build failed on cpu: ImportError: no module named 'triton_kernels'" in err


TINY = ["--seq-len", "64", "--batch", "1", "--heads", "1", "--head-dim", "16"]
TINY += ["--dtype", "float32", "--device", "cpu"]
KINETO_LINE = re.compile(r"^(USDT|STAGE)\b", re.MULTILINE)  # kineto's profiler_start/stop


@pytest.mark.parametrize("command", [[], ["compare"]])
def test_the_profilers_log_lines_only_with_verbose(tmp_path, command):
    """Seen failing when quiet_profiler_logs set nothing (USDT lines on stderr by default)."""
    variant = ["--variant", "naive"] if not command else ["--variants", "naive"]
    args = [*command, *variant, *TINY, "--out", str(tmp_path)]
    quiet, verbose = cli(*args), cli(*args, "--verbose")
    assert quiet.returncode == 0 and verbose.returncode == 0, quiet.stderr + verbose.stderr
    assert not KINETO_LINE.search(quiet.stderr), quiet.stderr
    assert KINETO_LINE.search(verbose.stderr), verbose.stderr
    assert "CPU µs" in quiet.stdout and "CPU µs" in verbose.stdout


def test_a_cpu_runs_gpu_figures_print_as_not_existing(tmp_path):
    """Seen failing when the runner kept 0.0 kernels/memcpy/memset on a CPU (0.00 printed)."""
    p = cli("--variant", "naive", *TINY, "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    rows = dict(line.strip().split("  ", 1) for line in p.stdout.splitlines()[:14])
    for label in ("kernels / forward", "memcpy / memset per forward", "GPU µs / forward"):
        assert rows[label].strip() == "n/a (CPU run: no GPU work)", p.stdout
    assert rows["bound"].strip() == rows["peak memory"].strip() == "n/a (CPU run: no GPU work)"


def test_a_training_step_from_the_command_line(tmp_path):
    """--mode train: the tag says so, the trace holds both phases, the summary each of them;
    `--variant all` lists flex as unavailable on a CPU (no FlexAttention backward there)."""
    shape = ["--seq-len", "64", "--batch", "1", "--heads", "2", "--head-dim", "16"]
    shape += ["--dtype", "float32", "--device", "cpu", "--mode", "train"]
    p = cli("--variant", "sdpa-flash", *shape, "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    tag = "sdpa-flash_1_2_64_16_float32_causal_cpu_3steps_train"
    events = json.loads(gzip.decompress((tmp_path / "sdpa-flash" / f"{tag}.json.gz").read_bytes()))
    names = [e.get("name") for e in events["traceEvents"]]
    assert names.count("attn_fwd") == names.count("attn_bwd") == names.count("attn_step") == 3
    for line in ("CPU µs / step", "phase attn_fwd", "phase attn_bwd", "dQ / dK / dV rel. error"):
        assert line in p.stdout, line
    p = cli("--variant", "all", *shape, "--out", str(tmp_path / "all"))
    assert "flex" in p.stdout + p.stderr and "no backward on CPU" in p.stdout + p.stderr
