"""Compare: CPU runs of the CPU-capable variants, the glance table on H200 traces, figures."""

from __future__ import annotations

import io
import pickle
import zipfile
from dataclasses import replace

import pandas as pd
import pytest

import profiling.workload.memory as memory_module
from profiling.analysis.launch import launch_stats
from profiling.analysis.peaks import peak_tflops, peaks_table
from profiling.analysis.summary import CAUSAL_CONVENTION, Summary, attention_flops, per_forward
from profiling.jobs.compare import (
    GLANCE_COLUMNS,
    POST_VARIANTS,
    CompareResult,
    VariantRun,
    compare,
    default_variants,
    glance_table,
    timeline,
)
from profiling.text_tables import markdown
from profiling.trace import model as trace
from profiling.views import compare as views_compare
from profiling.views.compare_figures import gpu_cpu_bars, mini_gantts
from profiling.workload.memory import estimate_bytes
from profiling.workload.spec import ConfigError, Workload
from tests.conftest import FIXTURES

SMALL = {"seq_len": 128, "batch": 1, "heads": 2, "head_dim": 32, "dtype": "float32"}
CPU_RUNNABLE = ["naive", "naive-inplace", "sdpa-math", "sdpa-flash"]


@pytest.fixture(scope="module")
def cpu_compare(tmp_path_factory) -> tuple[CompareResult, list[tuple[float, str]]]:
    seen: list[tuple[float, str]] = []
    result = compare(
        [*CPU_RUNNABLE, "sdpa-efficient", "sdpa-cudnn"],
        out_dir=tmp_path_factory.mktemp("compare"),
        progress=lambda f, t: seen.append((f, t)),
        device="cpu",
        **SMALL,
    )
    return result, seen


def test_cpu_compare_runs_each_variant_and_lists_the_rest_with_reasons(cpu_compare):
    result, _ = cpu_compare
    g = result.glance.set_index("variant")
    assert list(g.index) == [*CPU_RUNNABLE, "sdpa-efficient", "sdpa-cudnn"]
    assert list(result.glance.columns) == GLANCE_COLUMNS
    assert (g.loc[CPU_RUNNABLE, "status"] == "ok").all()
    assert (g.loc[CPU_RUNNABLE, "CPU µs/fwd"] > 0).all()
    assert (g.loc[CPU_RUNNABLE, "rel. err"] < 1e-5).all()
    assert g.loc[CPU_RUNNABLE, "GPU µs/fwd"].isna().all()  # no GPU: no number, not a zero
    assert g.loc[CPU_RUNNABLE, "% of peak"].isna().all()
    assert (g.loc[CPU_RUNNABLE, "bound"] == "n/a").all()
    assert g.loc["sdpa-math", "ran"] == "SDPA math"
    assert g.loc["sdpa-flash", "ran"] == "SDPA flash (CPU)"
    for vid in ("sdpa-efficient", "sdpa-cudnn"):
        assert g.loc[vid, "status"] == "unavailable"
        assert "needs a CUDA GPU" in g.loc[vid, "reason"]
    assert set(result.unavailable()["variant"]) == {"sdpa-efficient", "sdpa-cudnn"}
    assert result.device == "cpu" and result.peak is None


def test_progress_is_per_variant_and_ends_at_one(cpu_compare):
    _, seen = cpu_compare
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any(t.startswith("sdpa-math (3/6)") for _, t in seen)


def test_zip_holds_every_trace_and_table(cpu_compare):
    result, _ = cpu_compare
    with zipfile.ZipFile(result.zip_path) as zf:
        names = set(zf.namelist())
        glance = pd.read_csv(io.BytesIO(zf.read("glance.csv")))
    shape = "1_2_128_32_float32_causal_cpu_3steps"
    for vid in CPU_RUNNABLE:
        tag = f"{vid}_{shape}"
        assert {f"{vid}/{tag}.json.gz", f"{vid}/{tag}.txt", f"{vid}/kernels.csv"} <= names
    assert "sdpa-cudnn/unavailable.txt" in names
    assert list(glance["variant"]) == list(result.glance["variant"])
    assert glance["CPU µs/fwd"].tolist()[:4] == pytest.approx(
        result.glance["CPU µs/fwd"].tolist()[:4]
    )


def test_result_pickles_for_a_zerogpu_worker(cpu_compare):
    result, _ = cpu_compare
    back = pickle.loads(pickle.dumps(result))
    assert back.glance.equals(result.glance)
    assert back.runs[0].timeline is not None and not back.runs[0].timeline.empty


def test_cpu_figures(cpu_compare):
    result, _ = cpu_compare
    bars = gpu_cpu_bars(result)
    assert [t.name for t in bars.data] == ["CPU µs / forward (attn_fwd span)"]  # no GPU bar
    assert list(bars.data[0].x) == CPU_RUNNABLE and "no GPU time" in bars.layout.title.text
    gantt = mini_gantts(result)
    assert {t.name for t in gantt.data} == {"attn_fwd"}  # CPU run: only the attn_fwd spans


def test_refused_variant_is_listed_with_the_memory_reason(monkeypatch, tmp_path):
    big = Workload.from_user(variant="naive", device="cpu", **SMALL)
    small = big.with_(variant="sdpa-flash")
    budget = (estimate_bytes(big) + estimate_bytes(small)) // 2
    monkeypatch.setattr(memory_module, "available_bytes", lambda device: int(budget / 0.85))
    result = compare(["naive", "sdpa-flash"], out_dir=tmp_path, device="cpu", **SMALL)
    g = result.glance.set_index("variant")
    assert g.loc["naive", "status"] == "refused" and "reduce seq_len" in g.loc["naive", "reason"]
    assert g.loc["sdpa-flash", "status"] == "ok"


def test_bad_shape_or_unknown_variant_is_the_callers_error():
    with pytest.raises(ConfigError, match="head_dim must be a multiple of 8"):
        compare(["naive"], device="cpu", **{**SMALL, "head_dim": 60})
    with pytest.raises(ConfigError, match="unknown variant"):
        compare(["naive", "nope"], device="cpu", **SMALL)
    with pytest.raises(ConfigError, match="unknown shape parameter"):
        compare(["naive"], device="cpu", variant="naive", **SMALL)


def test_default_variants_are_the_posts_six_on_cpu():
    assert default_variants("cpu", "float32") == list(POST_VARIANTS)


@pytest.mark.parametrize(
    ("name", "dtype", "peak"),
    [
        ("NVIDIA H200", "bfloat16", 989.4),
        ("NVIDIA H200", "float32", 67.0),
        ("NVIDIA H100 80GB HBM3", "float16", 989.4),
        ("NVIDIA H100 PCIe", "bfloat16", 756.0),
        ("NVIDIA A100-SXM4-80GB", "float32", 19.5),
        ("NVIDIA A100 80GB PCIe", "bfloat16", 312.0),
        ("NVIDIA L4", "bfloat16", 121.0),
        ("NVIDIA L40S", "bfloat16", 362.05),
        ("NVIDIA A10", "float16", 125.0),
        ("Tesla T4", "float16", 65.0),
        ("Tesla T4", "bfloat16", None),  # Turing has no bf16 tensor cores
        ("NVIDIA A10G", "bfloat16", None),  # no NVIDIA datasheet: left out, not guessed
        ("NVIDIA H100 NVL", "bfloat16", None),
        ("NVIDIA H200 NVL", "bfloat16", None),
        ("NVIDIA GeForce RTX 4090", "bfloat16", None),
        ("CPU · AMD EPYC", "float32", None),
    ],
)
def test_datasheet_peaks(name, dtype, peak):
    assert peak_tflops(name, dtype) == peak


def test_peaks_table_names_its_source():
    table = peaks_table()
    assert table["source"].str.contains("NVIDIA").all() and "A10G" not in set(table["device"])


# -- the glance table on the H200 fixtures (GPU numbers without a GPU) ----------------------
def _fixture_run(variant: str, file: str) -> VariantRun:
    """A compare row from a real H200 trace, its summary filled the way the runner fills it."""
    tr = trace.load(FIXTURES / file)
    st = per_forward(tr)
    flops = attention_flops(8, 16, 1024, 64, True)
    shape = {"batch": 8, "heads": 16, "seq_len": 1024, "head_dim": 64, "dtype": "bfloat16"}
    summary = Summary(
        variant=variant, label=variant, config={**shape, "causal": True}, device="cuda",
        device_name="NVIDIA H200", torch_version="2.11.0", ran=f"SDPA {st.backend}",
        forwards=st.forwards, kernels_per_forward=st.kernels, memcpy_per_forward=st.memcpy,
        memset_per_forward=st.memset, gpu_us_per_forward=st.gpu_us, cpu_us_per_forward=st.cpu_us,
        cpu_bound=None, peak_mib=None, flops_per_forward=flops,
        tflops=flops / (st.gpu_us * 1e-6) / 1e12, tflops_basis=CAUSAL_CONVENTION, rel_err=None,
        rel_err_note="", dominant_kernel=st.dominant, dominant_decoded=st.dominant_decoded,
    )  # fmt: skip
    return VariantRun(
        variant,
        variant,
        "ok",
        summary=summary,
        launch=launch_stats(tr),
        timeline=timeline(tr.spans),
    )


@pytest.fixture(scope="module")
def h200_result() -> CompareResult:
    runs = [
        _fixture_run("naive", "naive_8_16_1024_64_bf16.json.gz"),
        _fixture_run("sdpa-flash", "sdpa_flash_8_16_1024_64_bf16.json.gz"),
        _fixture_run("sdpa-cudnn", "sdpa_cudnn_8_16_1024_64_bf16.json.gz"),
        VariantRun("sdpa-efficient", "SDPA efficient", "unavailable", "reason"),
    ]
    shape = {"seq_len": 1024, "dtype": "bfloat16", "batch": 8, "heads": 16, "head_dim": 64,
             "causal": True, "device": "cuda", "steps": 3}  # fmt: skip
    return CompareResult(
        shape=shape, device="cuda", device_name="NVIDIA H200", runs=runs,
        glance=glance_table(runs, "NVIDIA H200", "bfloat16"), out_dir=FIXTURES,
    )  # fmt: skip


def test_glance_on_h200_traces(h200_result):
    g = h200_result.glance.set_index("variant")
    # h200-baseline.md: naive 1065 GPU / 223 CPU µs → GPU-bound; flash 96 / 200 and cuDNN
    # 58 / 108 → CPU-bound ("the cost moves to the CPU"); CPU µs are the steps' median since
    # issue 31 (cuDNN's 165.3, 81.8, 77.3: 81.8, the mean was 108)
    assert g.loc["naive", "bound"] == "GPU-bound"
    assert (
        g.loc["sdpa-flash", "bound"] == "CPU-bound" and g.loc["sdpa-cudnn", "bound"] == "CPU-bound"
    )
    assert g.loc["sdpa-cudnn", "CPU µs/fwd"] > g.loc["sdpa-cudnn", "GPU µs/fwd"]
    assert g.loc[["naive", "sdpa-flash", "sdpa-cudnn"], "kernels/fwd"].tolist() == [5, 1, 1]
    assert g.loc["sdpa-cudnn", "% of peak"] == pytest.approx(
        100 * g.loc["sdpa-cudnn", "TFLOP/s"] / 989.4
    )
    assert 25 < g.loc["sdpa-cudnn", "% of peak"] < 35  # 295 TFLOP/s at this small shape
    assert g.loc["naive", "GPU busy %"] > 98 > 70 > g.loc["sdpa-flash", "GPU busy %"]
    assert g.loc["naive", "launch delay µs"] > 100 * g.loc["sdpa-cudnn", "launch delay µs"]
    assert "flash_fwd_kernel" in g.loc["sdpa-flash", "dominant kernel"]
    assert g.loc["sdpa-efficient", "status"] == "unavailable"
    assert "| sdpa-cudnn | ok | 1 | 58.2 | 81.8 | CPU-bound |" in markdown(h200_result.glance)


def test_h200_figures_share_one_time_axis(h200_result):
    bars = gpu_cpu_bars(h200_result)
    assert len(bars.data) == 2 and bars.layout.barmode == "group"
    assert list(bars.data[0].y) == pytest.approx([1065.05, 95.54, 58.20], abs=0.01)
    gantt = mini_gantts(h200_result)
    subplots = {t.yaxis for t in gantt.data}
    assert subplots == {"y", "y2", "y3"}  # one per variant that ran
    # shared: the upper subplots' x axes follow the bottom one, which carries the title
    assert gantt.layout.xaxis.matches == "x3" and gantt.layout.xaxis2.matches == "x3"
    assert "since the first active ProfilerStep" in gantt.layout.xaxis3.title.text
    memcpy = [t for t in gantt.data if t.name == "memcpy"]
    assert len(memcpy) == 1 and len(memcpy[0].x) == 3  # naive's Memcpy, once per forward
    assert all(t.orientation == "h" for t in gantt.data)
    assert {t.name for t in gantt.data} == {"attn_fwd", "kernel", "memcpy", "memset"}


def test_a_crash_mid_profile_fails_one_variant_not_the_compare(monkeypatch, tmp_path):
    import profiling.jobs.compare as compare_module

    real_run = compare_module.run

    def crashing(config, out_dir=None, progress=None):
        if config.variant == "naive":
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")
        return real_run(config, out_dir=out_dir, progress=progress)

    monkeypatch.setattr(compare_module, "run", crashing)
    result = compare(["naive", "naive-inplace"], out_dir=tmp_path, device="cpu", **SMALL)
    g = result.glance.set_index("variant")
    assert g.loc["naive", "status"] == "failed"
    assert (
        g.loc["naive", "reason"]
        == "RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert g.loc["naive-inplace", "status"] == "ok"


def test_a_broken_variant_is_failed_with_its_error_not_unavailable(monkeypatch, tmp_path):
    """Through the real runner: a build that raises and a forward that raises in warm-up are
    listed as failed, with the error's class and message; a rule's refusal stays unavailable."""
    from profiling.views.compare import compare_note
    from tests.run.test_runner import install_variant

    def no_module(problem):
        raise ImportError("no module named 'triton_kernels'")

    def illegal_access(q, k, v):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    install_variant(monkeypatch, "broken-build", build=no_module)
    install_variant(monkeypatch, "broken-forward", forward=illegal_access)
    names = ["broken-build", "broken-forward", "sdpa-cudnn", "naive"]
    result = compare(names, out_dir=tmp_path, device="cpu", **SMALL)
    g = result.glance.set_index("variant")
    assert g.loc["broken-build", "status"] == "failed"
    assert g.loc["broken-build", "reason"] == (
        "broken-build failed on cpu: ImportError: no module named 'triton_kernels'"
    )
    assert g.loc["broken-forward", "status"] == "failed"
    assert g.loc["broken-forward", "reason"] == (
        "broken-forward failed on cpu: RuntimeError: CUDA error: an illegal memory access was "
        "encountered"
    )
    assert g.loc["sdpa-cudnn", "status"] == "unavailable"
    assert g.loc["naive", "status"] == "ok"
    note = compare_note(result)
    assert "`broken-build` (failed): broken-build failed on cpu: ImportError" in note
    assert "`sdpa-cudnn` (unavailable)" in note


def test_compares_note_gives_each_sdpa_variants_own_checks_and_pick(tmp_path):
    """Issue 22 on Compare: an SDPA variant that ran says what torch's checks answered for its
    inputs and which backend it picks; a variant that picks nothing at call time says nothing."""
    from profiling.views.compare import compare_note

    result = compare(["naive", "sdpa-auto"], out_dir=tmp_path, device="cpu", **SMALL)
    note = compare_note(result)
    assert "`sdpa-auto`: SDPA picks flash: the CPU's own flash kernel" in note
    assert "the CUDA backends (flash, efficient, cudnn) refuse CPU tensors" in note
    assert "flash refuses" not in note  # the CUDA backend is not the one the CPU picks
    assert "chooses between its own flash kernel" in note and "`naive`: SDPA" not in note


# -- a training step: each phase named, the figures per step (issue 31) ----------------------
@pytest.fixture(scope="module")
def cpu_train_compare(tmp_path_factory) -> CompareResult:
    out = tmp_path_factory.mktemp("train")
    return compare(["naive", "sdpa-math"], out_dir=out, device="cpu", mode="train", **SMALL)


def test_a_train_compare_says_per_step_and_draws_both_phases(cpu_train_compare):
    """Compare in train mode said "CPU µs/fwd" over per-step figures, and its mini-Gantts drew
    the attn_bwd spans as attn_fwd (one legend entry, one lane)."""
    page = views_compare.compare_page(cpu_train_compare, "cpu")
    assert "CPU µs/step" in page.glance.columns
    assert not [column for column in page.glance.columns if column.endswith("/fwd")]
    shown = list(page.glance.columns)  # a CPU's: the phases' CPU figures, not empty GPU ones
    assert "bwd CPU µs" in shown and "dV err" in shown and "fwd GPU µs" not in shown
    widths = views_compare.glance_widths("cpu", shown)  # one per column, in pixels: it scrolls
    assert len(widths) == len(shown) and all(isinstance(w, int) for w in widths)
    assert "per step" in page.bars.layout.title.text and "per forward" not in str(page.bars)
    titles = [a.text for a in page.gantts.layout.annotations]  # the subplots' titles
    assert titles and all("µs per step" in title for title in titles), titles
    names = {t.name for t in page.gantts.data}
    assert {"attn_fwd", "attn_bwd"} <= names
    lanes = {lane for t in page.gantts.data for lane in t.y}
    assert {"CPU attn_fwd", "CPU attn_bwd"} <= lanes
    as_forward = {**cpu_train_compare.shape, "mode": "forward"}
    forward = views_compare.compare_page(replace(cpu_train_compare, shape=as_forward), "cpu")
    assert "CPU µs/fwd" in forward.glance.columns  # a forward's headers as before


def test_an_empty_role_table_is_said_not_shown(cpu_train_compare):
    """On a CPU the variants × roles table held a lone "variant" column; the page shows a line
    instead (views_compare.no_roles_note), and the table where there are roles."""
    roles = views_compare.compare_page(cpu_train_compare, "cpu").roles
    assert list(roles.columns) == ["variant"]
    assert "no GPU kernels ran" in views_compare.no_roles_note(roles)
    assert views_compare.no_roles_note(None)
    with_roles = pd.DataFrame({"variant": ["naive"], "softmax": [12.5]})
    assert views_compare.no_roles_note(with_roles) == ""
