"""What the page shows: summary strip, display tables, dropdown labels, banner, limits."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from attention import VARIANTS
from attention.naive import NO_MASK
from profiling.analysis import columns
from profiling.analysis.spread import step_spread
from profiling.analysis.summary import Summary, forward_spans, launched_within
from profiling.gantt.spec import bar_count
from profiling.kernels.names import kernel_table
from profiling.run.runner import run
from profiling.trace import model as trace
from profiling.views import profile as views_profile
from profiling.views import shared as views_shared
from profiling.views import sweep as views_sweep
from profiling.views import timing as views_timing
from profiling.views.text.summary import summary_rows
from profiling.workload import request as job_request
from profiling.workload.availability import unavailable_reasons
from profiling.workload.spec import (
    ConfigError,
    Workload,
    check_cpu_budget,
    page_ranges,
    resolve_device,
)
from tests.conftest import FIXTURES


def make_summary(device: str = "cuda", **changes) -> Summary:
    config = Workload(variant="sdpa-flash", seq_len=1024, dtype="bfloat16").as_dict()
    values = dict(
        variant="sdpa-flash", label=VARIANTS["sdpa-flash"].label, config=config, device=device,
        device_name="NVIDIA H200", torch_version="2.13.0", ran="SDPA flash", forwards=3,
        kernels_per_forward=1.0, memcpy_per_forward=0.0, memset_per_forward=0.0,
        gpu_us_per_forward=96.5, cpu_us_per_forward=138.25, cpu_bound=True, peak_mib=512.0,
        flops_per_forward=2.1e11, tflops=523.4, tflops_basis="GPU time; causal counted as half",
        rel_err=3.2e-3, rel_err_note="all heads", dominant_kernel="flash_fwd_kernel",
        dominant_decoded="FlashAttention-2 forward bundled in PyTorch", notes=[],
    )  # fmt: skip
    values.update(changes)
    return Summary(**values)


@pytest.fixture(scope="module")
def cpu_result(tmp_path_factory):
    config = Workload.from_user(**views_shared.defaults("cpu"), device="cpu")
    return run(config, out_dir=tmp_path_factory.mktemp("run"))


def test_strip_shows_the_issue_figures_on_a_gpu():
    cards = views_profile.summary_cards(make_summary())
    labels = [label for label, _, _ in cards]
    assert labels == [
        "kernels / forward", "GPU µs / forward", "CPU µs / forward", "peak memory", "TFLOP/s",
        "rel. error vs float64", "ran", "device",
    ]  # fmt: skip
    values = {label: (value, note) for label, value, note in cards}
    assert values["kernels / forward"][0] == "1"  # a whole count reads as one (issue 31)
    uneven = make_summary(kernels_per_forward=1428.5, memcpy_per_forward=1428.0)
    rows = dict(summary_rows(uneven))
    assert rows["kernels / forward"] == "1,428.50" and rows["memcpy / memset per forward"] == (
        "1,428 / 0"
    )
    assert values["GPU µs / forward"][0] == "96.5"
    assert values["CPU µs / forward"] == ("138.2", "")  # no range recorded: no note
    steps = step_spread([120.0, 138.25, 160.5], [96.4, 96.5, 96.6])
    spread = make_summary(cpu_us_range=[120.0, 160.5], step_spread=steps)
    cpu = {label: (v, n) for label, v, n in views_profile.summary_cards(spread)}["CPU µs / forward"]
    assert cpu == ("138.2", "median of 3, IQR 129.1–149.4")
    assert values["peak memory"][0] == "512.0 MiB"
    assert values["TFLOP/s"] == ("523.4", "GPU time; causal counted as half")
    assert values["rel. error vs float64"] == ("3.20e-03", "all heads")
    assert values["ran"][0] == "SDPA flash"
    assert values["device"] == ("NVIDIA H200", "torch 2.13.0")


def test_the_strip_says_the_median_and_warns_of_a_large_spread_over_three_steps():
    """Issue 31: the CPU card said 'mean of 3' and nothing of a 1,200% IQR over 3 steps."""
    steps = step_spread([1924.0, 6436.0, 393988.0], [90.0, 100.0, 130.0])
    summary = make_summary(cpu_us_per_forward=6436.0, step_spread=steps)
    cards = {label: (v, n) for label, v, n in views_profile.summary_cards(summary)}
    value, note = cards["CPU µs / forward"]
    assert value == "6,436.0" and note.startswith("median of 3, IQR 4,180.0–200,212.0")
    assert "large spread: IQR 3,046% of the median" in note and "mean" not in note
    gpu_note = cards["GPU µs / forward"][1]  # a mean (the kernel rows add up), said as one
    assert "large spread: IQR 20% of the median" in gpu_note and "mean of 3 steps" in gpu_note
    assert "median 100.0" in gpu_note
    html = views_profile.summary_html(summary)
    assert "large spread: IQR 3,046% of the median" in html
    timing = views_timing.timing_html(summary)
    assert "large spread" in timing and "3 steps" in timing
    tight = make_summary(step_spread=step_spread([100.0, 101.0, 102.0], [96.4, 96.5, 96.6]))
    assert "large" not in views_profile.summary_html(tight)
    assert "large" not in views_timing.timing_html(tight)
    runs = [SimpleNamespace(summary=summary), SimpleNamespace(summary=tight)]
    table, _ = views_timing.compare_timing(runs)
    assert list(table["large spread"]) == ["GPU, CPU", ""]


def test_strip_on_cpu_says_there_is_no_gpu_work():
    s = make_summary(device="cpu", device_name="CPU · Some CPU", gpu_us_per_forward=None,
                     peak_mib=None, kernels_per_forward=None, memcpy_per_forward=None,
                     memset_per_forward=None, cpu_bound=None, tflops=0.004731)  # fmt: skip
    values = {label: value for label, value, _ in views_profile.summary_cards(s)}
    assert values["TFLOP/s"] == "0.00473"  # a CPU's small rate keeps three figures, not 0.00
    assert values["kernels / forward"] == values["GPU µs / forward"] == "n/a"
    assert values["peak memory"] == "n/a"
    assert values["device"] == "CPU · Some CPU"
    notes = {label: note for label, _, note in views_profile.summary_cards(s)}
    assert notes["kernels / forward"] == notes["peak memory"] == "CPU run: no GPU work"
    rows = dict(summary_rows(s))  # the CLI's and the JSON's words: not "0.00 kernels"
    no_gpu = "n/a (CPU run: no GPU work)"
    assert rows["kernels / forward"] == rows["memcpy / memset per forward"] == no_gpu
    assert rows["GPU µs / forward"] == rows["peak memory"] == no_gpu
    assert rows["bound"] == no_gpu


def test_strip_html_escapes_everything():
    s = make_summary(ran="<script>alert(1)</script>", notes=["a <b>note</b> & more"])
    out = views_profile.summary_html(s)
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "&lt;b&gt;note&lt;/b&gt; &amp; more" in out
    assert out.count('class="ap-card"') == 8


def test_summary_json_has_no_nan():
    data = views_profile.summary_json(make_summary(rel_err=float("nan"), tflops=float("inf")))
    assert data["rel_err"] is None and data["tflops"] is None
    assert data["config"]["seq_len"] == 1024


def test_operator_view_is_readable_and_drops_gpu_columns_on_cpu(cpu_result):
    cpu = views_profile.operator_view(cpu_result.operators, "cpu")
    assert list(cpu.columns) == ["Operator", "Calls", "CPU self µs", "CPU total µs", "CPU avg µs"]
    assert (cpu.loc[cpu["Operator"] == "attn_fwd", "Calls"] == 3).all()
    decimals = (cpu["CPU total µs"] * 10).round(6) % 1
    assert (decimals == 0).all()  # rounded to 0.1 µs
    gpu = views_profile.operator_view(cpu_result.operators, "cuda")
    assert "GPU total µs" in gpu.columns and len(gpu.columns) == 8
    assert (
        views_shared.datatypes(cpu)
        == views_profile.operator_datatypes("cpu")
        == ["str"] + ["number"] * 4
    )
    assert list(cpu.columns) == views_profile.operator_headers("cpu")
    assert views_shared.datatypes(gpu) == views_profile.operator_datatypes("cuda")
    # the view's labels cover exactly the columns the runner builds, in its order
    assert list(columns.OPERATOR_COLUMNS) == list(cpu_result.operators.columns)


def test_kernel_view_keeps_the_decoding():
    t = trace.load(FIXTURES / "naive_8_16_1024_64_bf16.json.gz")
    raw = kernel_table(launched_within(t, forward_spans(t)), per=3)
    table = views_shared.kernel_view(raw)
    assert list(table.columns) == list(columns.KERNEL_COLUMNS.values())
    assert len(table) == len(raw) > 0
    assert table["What the name says"].str.len().gt(0).any()
    assert table["µs / fwd"].is_monotonic_decreasing
    assert (
        views_shared.datatypes(table) == views_shared.kernel_datatypes()
    )  # the component's static types
    assert views_shared.kernel_view(raw.iloc[0:0]).empty


def _capability_fails(monkeypatch) -> None:
    """The device query behind the compute-capability rules raises, as CUDA's does where the
    driver cannot be reached."""
    from attention import rules

    def no_driver():
        raise RuntimeError("CUDA driver initialization failed\n(details)")

    monkeypatch.setattr(rules, "capability", no_driver)


def test_a_check_that_raises_marks_its_variant_unavailable_with_the_error(monkeypatch):
    """Fail closed: outside ZeroGPU a variant whose check raised is not offered as runnable."""
    from profiling.jobs.compare import POST_VARIANTS
    from profiling.views import compare as views_compare

    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    _capability_fails(monkeypatch)
    reasons = unavailable_reasons("cuda", "bfloat16")
    why = "availability could not be checked: RuntimeError: CUDA driver initialization failed"
    for vid in ("sdpa-efficient", "sdpa-flash", "sdpa-cudnn", "kernels-flash-attn2"):
        assert reasons[vid] == why
    assert reasons["naive"] is None and reasons["sdpa-math"] is None  # their rules need no GPU
    labels = {vid: label for label, vid in views_profile.variant_choices("cuda", "bfloat16")}
    assert labels["sdpa-cudnn"].endswith(f"unavailable: {why}")
    lesson = views_profile.lesson_markdown("sdpa-cudnn", "cuda", "bfloat16")
    assert f"**Unavailable here:** {why}." in lesson
    assert labels["sdpa-flash"] == f"{VARIANTS['sdpa-flash'].label} — unavailable: {why}"
    assert views_sweep.sweep_defaults("cuda", "bfloat16") == ["naive"]
    assert views_compare.compare_defaults("cuda", "bfloat16") == [
        v for v in POST_VARIANTS if v in ("naive", "naive-inplace", "sdpa-math")
    ]


@pytest.mark.parametrize("flag", ["1", "true", "True"])
def test_on_zero_gpu_a_check_that_raises_leaves_the_variant_to_the_slot(monkeypatch, flag):
    """On ZeroGPU CUDA is emulated outside the GPU slot, so a device query can fail there by
    design: the variant stays offered and the runner checks again inside the slot."""
    from profiling.jobs.compare import POST_VARIANTS
    from profiling.views import compare as views_compare

    monkeypatch.setenv("SPACES_ZERO_GPU", flag)
    _capability_fails(monkeypatch)
    reasons = unavailable_reasons("cuda", "bfloat16")
    assert reasons["sdpa-cudnn"] is None and reasons["kernels-flash-attn2"] is None
    assert views_sweep.sweep_defaults("cuda", "bfloat16") == ["naive", "sdpa-flash", "sdpa-cudnn"]
    assert views_compare.compare_defaults("cuda", "bfloat16") == list(POST_VARIANTS)


def test_variant_choices_mark_unavailable_ones_with_the_reason():
    choices = views_profile.variant_choices("cpu", "float32")
    assert [value for _, value in choices] == list(VARIANTS)
    labels = dict((v, label) for label, v in choices)
    assert labels["naive"] == VARIANTS["naive"].label
    assert "unavailable: SDPA cuDNN needs a CUDA GPU" in labels["sdpa-cudnn"]
    lesson = views_profile.lesson_markdown("sdpa-cudnn", "cpu", "float32")
    assert VARIANTS["sdpa-cudnn"].lesson in lesson and "Unavailable here" in lesson
    assert "Unavailable" not in views_profile.lesson_markdown("naive", "cpu", "float32")
    flash_on_cpu = views_profile.lesson_markdown("sdpa-flash", "cpu", "float32")
    assert "On a GPU: one fused FlashAttention-2" in flash_on_cpu
    assert "On a GPU" not in views_profile.lesson_markdown("sdpa-flash", "cuda", "bfloat16")
    assert "Pick a variant" in views_profile.lesson_markdown("nope", "cpu", "float32")


def test_the_naive_lessons_say_what_full_attention_changes():
    full = views_profile.lesson_markdown("naive", "cuda", "bfloat16", causal=False)
    assert "Memcpy" in full and NO_MASK in full  # the lesson, and why it is moot here
    assert NO_MASK not in views_profile.lesson_markdown("naive", "cuda", "bfloat16", causal=True)
    assert NO_MASK not in views_profile.lesson_markdown("sdpa-flash", "cuda", "bfloat16", False)


def test_banner_only_on_cpu():
    text = views_profile.banner_markdown("cpu")
    assert "CPU run" in text and "GPU kernels" in text and "will not appear" in text
    assert views_profile.banner_markdown("cuda") == ""


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_defaults_are_valid_and_inside_the_sliders(device):
    start = views_shared.defaults(device)
    config = Workload.from_user(**start)
    ranges = page_ranges(device)
    for name, (low, high, step) in ranges.items():
        assert low <= start[name] <= high and (start[name] - low) % step == 0
    if device == "cuda":
        assert config.shape_text() == "B8 H16 S1024 D64 bfloat16"
    check_cpu_budget(config, device)  # the defaults are always allowed


def test_cpu_budget_refuses_huge_cpu_runs_only():
    big = Workload.from_user(variant="naive", seq_len=4096, batch=8, heads=16, head_dim=128)
    with pytest.raises(ConfigError, match="lower seq_len"):
        check_cpu_budget(big, "cpu")
    check_cpu_budget(big, "cuda")


def test_gpu_seconds_longer_for_compiled_and_hub_variants():
    assert job_request.gpu_seconds(Workload(variant="flex")) == job_request.GPU_SECONDS_SLOW
    assert (
        job_request.gpu_seconds(Workload(variant="kernels-flash-attn2"))
        == job_request.GPU_SECONDS_SLOW
    )
    assert job_request.gpu_seconds(Workload(variant="naive")) == job_request.GPU_SECONDS


def test_page_from_a_real_cpu_run(cpu_result):
    page = views_profile.page(cpu_result)
    assert bar_count(page.figure) == len(trace.load(cpu_result.trace_json).spans)
    assert page.files["gz"] == cpu_result.trace_gz and page.files["gz"].exists()
    assert "attn_fwd" in set(page.operators["Operator"])
    assert page.kernels.empty and "CPU run" in page.kernel_note
    assert page.summary["forwards"] == 3 and page.summary["device"] == "cpu"
    low, high = page.summary["cpu_us_range"]  # the three attn_fwd spans behind the mean
    assert low <= page.summary["cpu_us_per_forward"] <= high
    assert "naive" in page.figure.layout["title"]["text"]


def test_run_dirs_keeps_the_newest_and_never_touches_other_dirs(tmp_path):
    keeper = views_shared.RunDirs(keep=2)
    made = [Path(tempfile.mkdtemp(prefix="attnprof-")) for _ in range(3)]
    foreign = tmp_path / "attnprof-not-in-tmp"
    foreign.mkdir()
    keeper.add(foreign)
    for d in made:
        keeper.add(d)
    assert not made[0].exists() and made[1].exists() and made[2].exists()
    assert foreign.exists()
    for d in made[1:]:
        d.rmdir()


def test_page_device_matches_torch():
    assert resolve_device() == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_column_settings_match_the_tables(device):
    assert len(views_profile.operator_widths(device)) == len(views_profile.operator_headers(device))
    assert len(views_profile.operator_datatypes(device)) == len(
        views_profile.operator_headers(device)
    )
    headers = views_shared.kernel_headers()
    assert len(views_shared.kernel_widths()) == len(headers) == len(views_shared.kernel_datatypes())


def fixture_kernels(fixture: str):
    from profiling.analysis.summary import forward_work
    from profiling.kernels.names import kernel_table
    from profiling.trace import model as trace
    from tests.conftest import FIXTURES

    windows, work = forward_work(trace.load(FIXTURES / f"{fixture}.json.gz"))
    return kernel_table(work, per=len(windows))


@pytest.mark.parametrize(
    ("fixture", "flagged_kernels"),
    [
        ("naive_8_16_1024_64_bf16", {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
                                     "nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT"}),
        ("h200_kernels-local-triton_8_16_1024_64_bf16", {"_flash_fwd_kernel"}),
        ("sdpa_cudnn_8_16_1024_64_bf16",
         {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_…"}),
    ],
)  # fmt: skip
def test_an_occupancy_cupti_could_not_estimate_is_flagged_not_printed(fixture, flagged_kernels):
    """Issue 22, point 4: CUPTI writes 0% for launches it cannot estimate (cuLaunchKernelEx /
    cluster launches: nvjet, cuDNN, Triton); 0% of a grid that gives every SM a warp cannot be
    true, so the page shows no number and says why."""
    from profiling.kernels.names import OCCUPANCY_UNKNOWN

    kernels = fixture_kernels(fixture)
    flagged = kernels["occupancy_note"] == OCCUPANCY_UNKNOWN
    assert set(kernels.loc[flagged, "kernel"]) == flagged_kernels
    assert kernels.loc[flagged, "occupancy_pct"].isna().all()
    view = views_shared.kernel_view(kernels)
    assert view.loc[flagged.to_numpy(), "Est. occupancy %"].isna().all()
    assert (kernels.loc[~flagged, "occupancy_note"] == "").all()


def test_a_true_zero_occupancy_stays():
    """The math backend's FillFunctor runs one block of 4 warps on 132 SMs: 0% is CUPTI's
    rounding of a real figure, kept, with no note; real estimates stay as they are."""
    kernels = fixture_kernels("h200_sdpa-math_8_16_1024_64_bf16")
    tiny = kernels[kernels["grid"] == "1×1×1"]
    assert len(tiny) and (tiny["occupancy_pct"] == 0).all()
    assert (tiny["occupancy_note"] == "").all()
    assert kernels["occupancy_pct"].max() == 100


def test_each_tab_module_holds_its_gradio_wiring():
    """Only profiling/page/ imports gradio (the contract "only the page imports gradio" in
    pyproject.toml, checked by tests/test_layers.py); each tab's wiring lives there."""
    page = Path(__file__).resolve().parents[2] / "profiling" / "page"
    assert all("import gradio" in path.read_text() for path in page.glob("*_tab.py"))
