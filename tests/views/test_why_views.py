"""Issue 22 on every view: roles and the per-kernel roofline on Profile (page, API summary,
CLI text), Compare (variants × roles, one roofline), Diff (aligned by role) and Analyse
(roofline from a trace's recorded shapes; "not placed" where it recorded none)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from profiling.analysis import role_views
from profiling.analysis.analyze import analyze
from profiling.analysis.roofline_runs import run_roofline
from profiling.jobs.compare import VariantRun
from profiling.run import trace as run_trace
from profiling.trace import model as trace
from profiling.views import diff as views_diff
from profiling.views import profile as views_profile
from profiling.workload.spec import Workload
from tests.conftest import FIXTURES

POST = dict(batch=8, heads=16, seq_len=1024, head_dim=64, dtype="bfloat16", device="cpu")


def fixture_result(name: str, variant: str, mode: str = "forward") -> SimpleNamespace:
    """What the views read of a ProfileResult, from an H200 fixture and its workload."""
    workload = Workload.from_user(variant=variant, mode=mode, **POST)
    read = run_trace.read(FIXTURES / f"{name}.json.gz", workload.measured, workload.phases)
    summary = SimpleNamespace(device_name="NVIDIA H200", mode=mode, phases=workload.phases,
                              config=workload.as_dict())  # fmt: skip
    return SimpleNamespace(trace=read, config=workload, summary=summary)


def test_a_runs_roofline_sizes_each_kernel_by_its_role_and_workload():
    rows = run_roofline(fixture_result("naive_8_16_1024_64_bf16", "naive")).set_index("role")
    # QKᵀ: 2·B·H·T·T·D FLOPs; bytes: read Q and K, write the bf16 scores
    assert rows.loc["QKᵀ", "flop_per_call"] == 2 * 8 * 16 * 1024 * 1024 * 64
    assert rows.loc["QKᵀ", "bytes_per_call"] == 2 * (2 * 128 * 1024 * 64 + 128 * 1024 * 1024)
    assert rows.loc["QKᵀ", "source"] == "GEMM formula (workload)"
    assert rows.loc["copy", "source"] == "profiler: bytes"  # the Memcpy's own args
    assert rows.loc["mask", "bound"] == "memory" and rows.loc["QKᵀ", "tflops"] > 100


def test_a_train_step_has_roles_and_roofline_rows_per_phase():
    result = fixture_result("h200_train-naive_8_16_1024_64_bf16", "naive", "train")
    roles = result.trace.roles()
    assert set(roles["phase"]) == {"attn_fwd", "attn_bwd"}
    backward = roles[roles["phase"] == "attn_bwd"].set_index("role")
    assert backward.loc["dQ/dK/dV", "calls"] == 4  # dP, dV, dQ, dK: four GEMMs per step
    text = views_profile.why_text(result)
    assert "Kernels by role (µs per step)" in text and "Roofline per kernel" in text
    assert "dQ/dK/dV" in text and "attn_bwd" in text


def test_compare_draws_every_variants_attention_kernels_on_one_roofline():
    runs = []
    for name, variant in (("naive_8_16_1024_64_bf16", "naive"),
                          ("sdpa_flash_8_16_1024_64_bf16", "sdpa-flash")):  # fmt: skip
        result = fixture_result(name, variant)
        runs.append(VariantRun(variant, variant, "ok", roles=result.trace.roles(),
                               roofline=run_roofline(result)))  # fmt: skip
    matrix = role_views.role_matrix((r.variant, r.roles) for r in runs).set_index("variant")
    assert matrix.loc["naive", "fused attention forward"] == 0
    assert matrix.loc["sdpa-flash", "fused attention forward"] > 0
    assert matrix.loc["naive", "mask"] > matrix.loc["naive", "QKᵀ"]
    from profiling.views.compare import compare_roofline

    compared = SimpleNamespace(runs=runs, device_name="NVIDIA H200", shape={"dtype": "bfloat16"})
    figure = compare_roofline(compared)
    points = [t for t in figure.data if t.get("mode") == "markers"]
    assert [t["name"] for t in points] == ["naive", "sdpa-flash"]


def test_diff_aligns_two_traces_by_role():
    page = views_diff.diff_page(
        FIXTURES / "naive_8_16_1024_64_bf16.json.gz",
        FIXTURES / "sdpa_flash_8_16_1024_64_bf16.json.gz",
        "naive",
        "flash",
    )
    assert "naive spends 358.5 µs per forward on mask; flash does it inside its fused kernel" in (
        page.headline
    )
    assert "copy; flash has no kernel in that role" in page.headline
    roles = page.roles.set_index("role")
    assert roles.loc["fused attention forward", "µs flash"] == pytest.approx(95.5, abs=0.1)
    assert roles.loc["mask", "Δ µs (flash − naive)"] == pytest.approx(-358.5, abs=0.1)


def test_analyse_places_an_uploads_kernels_from_its_recorded_shapes():
    shaped = analyze(FIXTURES / "h200_user-naive_8_16_1024_64_bf16.json.gz")
    # no attention op above its launches (issue 31): its matmuls are plain GEMMs, still placed
    rows = shaped.roofline.set_index("kernel")
    qk = rows.loc["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"]
    assert (qk["role"], qk["source"]) == ("GEMM", "recorded shapes")
    assert qk["flop_per_call"] == 2 * 128 * 1024 * 1024 * 64
    assert shaped.dtype == "bfloat16" and shaped.device_name == "NVIDIA H200"
    assert set(shaped.roles["role"]) >= {"GEMM", "softmax", "elementwise"}
    bare = analyze(FIXTURES / "naive_8_16_1024_64_bf16.json.gz")  # recorded no shapes
    gemms = bare.roofline[bare.roofline["role"].isin(["QKᵀ", "PV"])]
    assert (gemms["source"] == "not placed: no recorded shapes for the op that launched it").all()
    assert (bare.roofline.loc[bare.roofline["role"] == "copy", "source"] == "profiler: bytes").all()


def test_the_cli_prints_roles_and_roofline_for_an_upload(capsys):
    from profiling.__main__ import main

    assert main(["analyze", str(FIXTURES / "h200_user-naive_8_16_1024_64_bf16.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "== kernels by role in attention" in out and "== roofline per kernel" in out
    assert "recorded shapes" in out


def test_a_cpu_run_says_its_roles_and_roofline_are_empty(tmp_path: Path):
    from profiling.run.runner import run

    workload = Workload.from_user(variant="naive", device="cpu", batch=1, heads=2, seq_len=64,
                                  head_dim=16, dtype="float32")  # fmt: skip
    result = run(workload, out_dir=tmp_path)
    page = views_profile.page(result)
    assert page.summary["roles"] == [] and page.summary["roofline"] == []
    assert list(page.roles.columns)[:2] == ["Role", "µs / step"]
    assert page.roofline_figure is not None
    assert trace.load(result.trace_gz).has_gpu is False


def test_the_cli_diff_aligns_two_traces_by_role(capsys):
    from profiling.__main__ import main

    naive, flash = (str(FIXTURES / f"{name}.json.gz") for name in
                    ("naive_8_16_1024_64_bf16", "sdpa_flash_8_16_1024_64_bf16"))  # fmt: skip
    assert main(["diff", naive, flash, "--label-a", "naive", "--label-b", "flash"]) == 0
    out = capsys.readouterr().out
    assert "== by role in attention ==" in out
    assert "naive spends 358.5 µs per forward on mask; flash does it inside its fused kernel" in out
