"""The Compare, Diff, Sweep and Analyse handlers, called directly; bad input is a clear gr.Error.

CPU runs at tiny shapes with eager variants only (no torch.compile), so the module stays quick.
"""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go
import pytest

import app
from profiling.analysis.launch import launch_stats
from profiling.analysis.peaks import peak_entry
from profiling.analysis.summary import CAUSAL_CONVENTION, Summary, attention_flops, per_forward
from profiling.gantt.spec import bar_count
from profiling.jobs.compare import (
    GLANCE_COLUMNS,
    POST_VARIANTS,
    CompareResult,
    VariantRun,
    glance_table,
    timeline,
)
from profiling.page import analyze_tab, compare_tab, diff_tab, sweep_tab
from profiling.trace.model import load
from profiling.views import compare as views_compare
from profiling.views import diff as views_diff
from profiling.views import shared as views_shared
from profiling.views import sweep as views_sweep
from profiling.workload import request as job_request
from profiling.workload.spec import Workload
from tests.conftest import CUDNN, FIXTURES, NAIVE, RecordingProgress

SMALL = dict(seq_len=128, dtype="float32", batch=1, heads=2, head_dim=32, causal=True)
INPLACE = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"
MiB = 1024**2
CPU_ONLY = pytest.mark.skipif(app.DEVICE != "cpu", reason="needs a machine without CUDA")


def no_progress(*args, **kwargs) -> None:
    return None


def message_of(fn, *args, **kwargs) -> gr.Error:
    with pytest.raises(gr.Error) as info:
        fn(*args, **kwargs)
    return info.value


# -- Compare -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compared():
    progress = RecordingProgress()
    out = compare_tab.compare(["naive", "sdpa-math", "sdpa-cudnn"], **SMALL, progress=progress)
    return out, progress.seen


def test_compare_returns_table_note_figures_zip_and_the_runs(compared):
    (glance, note, bars, gantts, timing, zip_path, roles, roofline, traces), _ = compared
    assert list(roles.columns)[:1] == ["variant"]  # on a CPU no variant has GPU kernels
    if app.DEVICE == "cpu":  # no GPU kernels: the chart says why, no log axes over nothing
        assert roofline.layout["annotations"][0]["text"].startswith("No roofline: ")
    else:
        assert roofline.layout["xaxis"]["type"] == "log"
    assert list(glance.columns) == views_compare.glance_columns(app.DEVICE)
    assert len(views_compare.glance_datatypes(app.DEVICE)) == len(glance.columns)
    g = glance.set_index("variant")
    assert list(g.index) == ["naive", "sdpa-math", "sdpa-cudnn"]
    assert (g.loc[["naive", "sdpa-math"], "status"] == "ok").all()
    assert (g.loc[["naive", "sdpa-math"], "CPU µs/fwd"] > 0).all()
    assert g.loc["sdpa-math", "ran"] == "SDPA math"
    if app.DEVICE == "cpu":
        assert g.loc["sdpa-cudnn", "status"] == "unavailable"
        assert "needs a CUDA GPU" in g.loc["sdpa-cudnn", "reason"]
        assert "no datasheet peak for this device" in note
        assert "`sdpa-cudnn` (unavailable)" in note and "needs a CUDA GPU" in note
        assert "decoded" not in glance.columns  # a constant on a CPU: left out
    assert "2 of 3 variants ran" in note or app.DEVICE == "cuda"
    assert isinstance(bars, go.Figure) and list(bars.data[-1].x) == ["naive", "sdpa-math"]
    assert isinstance(gantts, go.Figure) and len(gantts.data) >= 2
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
    assert {"glance.csv", "peaks.csv"} <= names
    assert any(n.startswith("naive/") and n.endswith(".json.gz") for n in names)
    assert set(traces) == {"naive", "sdpa-math"} and all(Path(p).exists() for p in traces.values())
    # issue 23: each run's figures in the zip, and the timing table of the variants that ran
    assert any(n.startswith("naive/") and n.endswith(".run.json") for n in names)
    timing_table, peaks = timing
    assert list(timing_table["variant"]) == ["naive", "sdpa-math"]
    assert (timing_table["CPU µs/step median"] > 0).all()
    assert (timing_table["timing"] == "eager").all() and isinstance(peaks, go.Figure)


@CPU_ONLY
def test_tables_with_gaps_are_strict_json_for_api_callers(compared):
    """An unavailable variant's empty cells reach the API as null, not a bare NaN token."""
    (glance, *_), _ = compared
    assert glance.isna().to_numpy().any()  # sdpa-cudnn cannot run on this machine: gaps
    sent = gr.Dataframe().postprocess(glance).model_dump()
    assert "null" in json.dumps(sent, allow_nan=False)


def test_compare_progress_is_per_variant(compared):
    _, seen = compared
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any(text.startswith("sdpa-math (2/3)") for _, text in seen)


def test_diff_of_two_runs_of_the_last_compare(compared):
    (*_, traces), _ = compared
    headline, kernels, operators, _roles = diff_tab.diff_runs("naive", "sdpa-math", traces)
    assert "sdpa-math" in headline and "per forward" in headline
    assert "count naive" in operators.columns and "count sdpa-math" in operators.columns
    ops = operators.set_index("operator")
    assert ops.loc["aten::scaled_dot_product_attention", "where"] == "only sdpa-math"
    if app.DEVICE == "cpu":
        assert kernels.empty and "no GPU work in either trace" in headline


@pytest.mark.parametrize(
    ("picks", "traces", "message"),
    [
        (("naive", "sdpa-math"), {}, "run a Compare first"),
        (("naive", "/etc/passwd"), {"naive": "x", "sdpa-math": "y"}, "not a run of the last"),
        (("naive", None), {"naive": "x", "sdpa-math": "y"}, "not a run of the last"),
        (("naive", "naive"), {"naive": "x", "sdpa-math": "y"}, "two different runs"),
        (("naive", "sdpa-math"), {"naive": "/nonexistent/a", "sdpa-math": "/nonexistent/b"},
         "cleaned up"),
    ],
)  # fmt: skip
def test_diff_of_runs_refuses_what_is_not_in_the_session_state(picks, traces, message):
    assert message in message_of(diff_tab.diff_runs, *picks, traces).message


def test_fill_diff_picks_offers_the_runs_that_ran():
    a, b = diff_tab.fill_diff_picks({"naive": "x", "sdpa-flash": "y"})
    assert [v for _, v in a.choices] == ["naive", "sdpa-flash"]
    assert (a.value, b.value) == ("naive", "sdpa-flash")
    empty, _ = diff_tab.fill_diff_picks({})
    assert empty.choices == [] and empty.value is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(variants="naive"), "must be a list of variant ids"),
        (dict(variants=[1, 2]), "must be a list of variant ids"),
        (dict(variants={"naive": 1}), "must be a list of variant ids"),
        (dict(variants=[]), "pick at least one variant"),
        (dict(variants=None), "pick at least one variant"),
        (dict(variants=["naive", "../etc/passwd"]), "unknown variant"),
        (dict(variants=["naive"] * 65), "variants: at most 64 entries, got 65"),
        (dict(seq_len=100.5), "seq_len must be a whole number"),
        (dict(seq_len=10**9), "seq_len must be between"),
        (dict(seq_len=10**400), "got an integer of about 401 digits"),
        (dict(head_dim=60), "multiple of 8"),
        (dict(dtype="float64"), "unknown dtype"),
        (dict(causal="maybe"), "causal must be true or false"),
    ],
)
def test_compare_bad_inputs_are_clear_errors(changes, message):
    args = {"variants": ["naive"], **SMALL, **changes}
    error = message_of(compare_tab.compare, **args, progress=no_progress)
    assert message in error.message and error.title == "Check the inputs"


@CPU_ONLY
def test_compare_cpu_budget_per_run_and_per_job():
    big = dict(SMALL, seq_len=4096, batch=8, heads=16, head_dim=128)
    assert (
        "GFLOP" in message_of(compare_tab.compare, ["naive"], **big, progress=no_progress).message
    )
    assert (
        "at most 6 variants"
        in message_of(
            compare_tab.compare, [*POST_VARIANTS, "sdpa-auto"], **SMALL, progress=no_progress
        ).message
    )
    # each run fits (19 GFLOP ≤ 20), five of them do not (≤ 80 per job); unavailable ones are free
    shape = dict(seq_len=1024, dtype="float32", batch=8, heads=16, head_dim=72, causal=True)
    five = ["naive", "naive-inplace", "sdpa-auto", "sdpa-math", "sdpa-flash"]
    error = message_of(compare_tab.compare, five, **shape, progress=no_progress)
    assert "summed over its 5 runs" in error.message
    request = job_request.compare_request(["naive", "sdpa-cudnn", "sdpa-efficient"], "cpu", **shape)
    assert request.variants == ["naive", "sdpa-cudnn", "sdpa-efficient"]
    # the limit counts distinct variants: seven times the same one is one run
    request = job_request.compare_request(["naive"] * 7, "cpu", **shape)
    assert request.variants == ["naive"]


def test_unexpected_compare_error_is_generic_and_logged(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise KeyError("secret-internal-detail")

    monkeypatch.setattr(compare_tab, "run_compare", broken)
    with caplog.at_level(logging.ERROR, logger="attention_profiler"):
        error = message_of(compare_tab.compare, ["naive"], **SMALL, progress=no_progress)
    assert error.message == views_shared.GENERIC_ERROR and "secret" not in error.message
    assert any("secret-internal-detail" in (r.exc_text or "") for r in caplog.records)


def test_job_gpu_seconds_count_runs_and_slow_variants_once():
    def configs(*names: str) -> list[Workload]:
        return [Workload.from_user(variant=n) for n in names]

    base, per = job_request.GPU_SECONDS_JOB, job_request.GPU_SECONDS_PER_RUN
    assert job_request.job_gpu_seconds(configs("naive", "sdpa-flash")) == base + 2 * per
    assert (
        job_request.job_gpu_seconds(configs("naive", "flex"))
        == base + per + job_request.GPU_SECONDS_SLOW
    )
    assert (
        job_request.job_gpu_seconds(configs(*["flex", "compiled-naive"] * 4))
        == job_request.GPU_SECONDS_JOB_MAX
    )


def test_compare_defaults_fall_back_to_the_posts_six(monkeypatch):
    import profiling.views.compare as module

    def emulated(*args, **kwargs):
        raise RuntimeError("CUDA is emulated outside the GPU slot")

    monkeypatch.setenv("SPACES_ZERO_GPU", "true")  # only there (test_views: fail closed elsewhere)
    monkeypatch.setattr(module, "default_variants", emulated)
    assert views_compare.compare_defaults("cuda", "bfloat16") == list(POST_VARIANTS)


def test_compare_and_sweep_preselect_only_what_runs_here():
    """Issue 19, point 2: on a CPU Compare preselected sdpa-efficient and sdpa-cudnn, two rows
    of "needs a CUDA GPU" on the first click. What it preselects is the backend's default list
    (unchanged for API callers) less what cannot run here."""
    from profiling.jobs.compare import default_variants
    from profiling.workload.availability import unavailable_reasons

    reasons = unavailable_reasons("cpu", "float32")
    assert reasons["sdpa-efficient"] and reasons["sdpa-cudnn"]
    assert "sdpa-efficient" in default_variants("cpu", "float32")  # what /compare runs unasked
    picked = views_compare.compare_defaults("cpu", "float32")
    assert picked == ["naive", "naive-inplace", "sdpa-math", "sdpa-flash"]
    assert views_sweep.sweep_defaults("cpu", "float32") == ["naive", "sdpa-flash"]


# -- Compare on a GPU: the glance view and the peak note, from H200 traces ----------------------
def _h200_run(variant: str, path: Path) -> VariantRun:
    tr = load(path)
    st = per_forward(tr)
    flops = attention_flops(8, 16, 1024, 64, True)
    shape = {"batch": 8, "heads": 16, "seq_len": 1024, "head_dim": 64, "dtype": "bfloat16"}
    summary = Summary(
        variant=variant, label=variant, config={**shape, "causal": True}, device="cuda",
        device_name="NVIDIA H200", torch_version="2.11.0", ran=f"SDPA {st.backend or 'eager'}",
        forwards=st.forwards, kernels_per_forward=st.kernels, memcpy_per_forward=st.memcpy,
        memset_per_forward=st.memset, gpu_us_per_forward=st.gpu_us, cpu_us_per_forward=st.cpu_us,
        cpu_bound=None, peak_mib=512.0, flops_per_forward=flops,
        tflops=flops / (st.gpu_us * 1e-6) / 1e12, tflops_basis=CAUSAL_CONVENTION, rel_err=2e-3,
        rel_err_note="", dominant_kernel=st.dominant, dominant_decoded=st.dominant_decoded,
    )  # fmt: skip
    return VariantRun(variant, variant, "ok", summary=summary, launch=launch_stats(tr),
                      timeline=timeline(tr.spans))  # fmt: skip


def _h200_result(device_name: str = "NVIDIA H200", dtype: str = "bfloat16") -> CompareResult:
    runs = [_h200_run("naive", NAIVE), _h200_run("sdpa-cudnn", CUDNN),
            VariantRun("kernels-flash-attn3", "FA3", "unavailable", "Hub unreachable")]  # fmt: skip
    shape = {"seq_len": 1024, "dtype": dtype, "batch": 8, "heads": 16, "head_dim": 64,
             "causal": True, "device": "cuda", "steps": 3}  # fmt: skip
    return CompareResult(
        shape=shape, device="cuda", device_name=device_name, runs=runs,
        glance=glance_table(runs, device_name, dtype), out_dir=FIXTURES,
        peak=peak_entry(device_name),
    )  # fmt: skip


def test_gpu_glance_has_every_column_and_names_the_datasheet_peak():
    shown = views_compare.compare_page(_h200_result(), "cuda")
    assert list(shown.glance.columns) == GLANCE_COLUMNS == views_compare.glance_columns("cuda")
    g = shown.glance.set_index("variant")
    assert g.loc["naive", "GPU µs/fwd"] == 1065.1 and g.loc["naive", "bound"] == "GPU-bound"
    assert g.loc["sdpa-cudnn", "bound"] == "CPU-bound"  # "the cost moves to the CPU"
    assert 25 < g.loc["sdpa-cudnn", "% of peak"] < 35
    assert g.loc["naive", "GPU busy %"] == 99.1 and g.loc["sdpa-cudnn", "launch delay µs"] == 2.2
    assert g.loc["kernels-flash-attn3", "reason"] == "Hub unreachable"
    assert "% of peak:** NVIDIA datasheet dense bf16 989.4 TFLOP/s for H200 SXM" in shown.note
    assert "`kernels-flash-attn3` (unavailable): Hub unreachable" in shown.note
    assert len(shown.bars.data) == 2  # GPU and CPU bars, grouped


@pytest.mark.parametrize(
    ("device_name", "dtype", "says"),
    [
        ("NVIDIA H200", "float32", "NVIDIA datasheet dense fp32 67 TFLOP/s for H200 SXM"),
        ("Tesla T4", "bfloat16", "no datasheet peak for bfloat16 on T4"),
        ("NVIDIA GeForce RTX 4090", "bfloat16", "no datasheet peak for this device (NVIDIA Ge"),
    ],
)
def test_peak_note(device_name, dtype, says):
    assert says in views_compare.peak_note(_h200_result(device_name, dtype))


# -- Diff of uploads ---------------------------------------------------------------------------
def test_diff_of_fixtures_reads_the_memcpy_off():
    headline, kernels, operators, roles = diff_tab.diff(str(NAIVE), str(INPLACE))
    assert roles.set_index("role").loc["copy", "Δ µs (B − A)"] == -126.5
    memcpy = kernels.set_index("kernel").loc["Memcpy DtoD"]
    assert (memcpy["count A"], memcpy["count B"], memcpy["Δ count (B − A)"]) == (1, 0, -1)
    assert memcpy["where"] == "only A" and memcpy["Δ total µs (B − A)"] == -126.5
    assert headline.startswith("B has 1 fewer Memcpy DtoD per forward (−126.5 µs)")
    assert "7 → 6" in headline
    assert kernels.iloc[0]["kernel"] == "Memcpy DtoD"  # sorted by |Δ total µs|
    assert len(views_diff.KERNEL_DIFF_TYPES) == len(kernels.columns)
    assert len(views_diff.OPERATOR_DIFF_TYPES) == len(operators.columns)
    assert operators.set_index("operator").loc["aten::clone", "where"] == "only A"


def test_diff_hides_the_kernel_table_where_neither_side_has_kernels(compared):
    """Issue 19, point 5: a Diff of two CPU runs showed an empty kernel table with cut-off
    headers; it is hidden, with a line why, and comes back for traces with GPU work."""
    (*_, traces), _ = compared
    headline, kernels, _, _ = diff_tab.diff_runs("naive", "sdpa-math", traces)
    markdown, table, why = diff_tab.show_result(headline, kernels)
    assert markdown == views_diff.escape_markdown(headline)  # the plain headline as Markdown
    if app.DEVICE == "cpu":
        assert kernels.empty and table == {"__type__": "update", "visible": False}
        assert why.visible and why.value == views_diff.NO_KERNELS
    headline, kernels, _, _ = diff_tab.diff(str(NAIVE), str(INPLACE))
    _, table, why = diff_tab.show_result(headline, kernels)
    assert table["visible"] is True and not why.visible and why.value == ""
    # before any Diff, and after a failed one: the page as it started, the table in its place
    assert views_diff.result_view(None, None) == ("", True, "")
    cleared_headline, cleared_operators, cleared_roles, markdown, table, why = diff_tab.emptied()
    assert (cleared_headline, cleared_operators, cleared_roles, markdown) == (None, None, None, "")
    assert table == {"__type__": "update", "value": None, "visible": True} and not why.visible


def test_diff_labels_name_the_columns():
    headline, kernels, _, _ = diff_tab.diff(str(NAIVE), str(INPLACE), "naive", " naive-inplace ")
    assert headline.startswith("naive-inplace has 1 fewer Memcpy DtoD")
    assert {"count naive", "count naive-inplace"} <= set(kernels.columns)


@pytest.mark.parametrize(
    ("setup", "message", "title"),
    [
        (lambda t: (str(NAIVE), None, "", ""), "upload trace B", "Check the inputs"),
        (lambda t: (None, str(NAIVE), "", ""), "upload trace A", "Check the inputs"),
        (lambda t: (write(t, "a.json", b"hello"), str(NAIVE), "", ""),
         "trace A: not valid JSON", "Unreadable trace"),
        (lambda t: (str(NAIVE), write(t, "b.json", b'{"schemaVersion": 1}'), "", ""),
         "trace B: JSON is not a Chrome trace: no `traceEvents` list", "Unreadable trace"),
        (lambda t: (str(NAIVE), write(t, "b.json", b""), "", ""), "trace B: the file is empty",
         "Unreadable trace"),
        (lambda t: (str(NAIVE), str(INPLACE), "x" * 40, ""), "at most 32 characters",
         "Check the inputs"),
        (lambda t: (str(NAIVE), str(INPLACE), "<script>", ""), "may use letters",
         "Check the inputs"),
        (lambda t: (str(NAIVE), str(INPLACE), "same", "same"), "labels must differ",
         "Check the inputs"),
        (lambda t: (str(NAIVE), str(INPLACE), 7, ""), "a label must be text", "Check the inputs"),
    ],
)  # fmt: skip
def test_diff_bad_uploads_are_clear_errors(tmp_path, setup, message, title):
    error = message_of(diff_tab.diff, *setup(tmp_path))
    assert message in error.message and error.title == title


def test_diff_upload_size_is_checked_before_reading(monkeypatch):
    monkeypatch.setattr(views_shared, "TRACE_MAX_UPLOAD_BYTES", 1024)
    error = message_of(diff_tab.diff, str(NAIVE), str(NAIVE))
    assert "trace A is 5 KiB; the limit is 1 KiB (upload the .json.gz)" in error.message


def write(folder: Path, name: str, data: bytes) -> str:
    path = folder / name
    path.write_bytes(data)
    return str(path)


# -- Sweep -------------------------------------------------------------------------------------
@CPU_ONLY
def test_sweep_marks_points_over_the_cpu_budget_refused():
    # S=4096 at B4 H8 D64 needs 69 GFLOP per forward, over the CPU's 20: refused, not run
    progress = RecordingProgress()
    time_fig, memory_fig, table, zip_path = sweep_tab.sweep(
        ["naive", "sdpa-cudnn"], [4096, 256], "float32", 4, 8, 64, True, progress=progress
    )
    assert any(text.startswith("naive S=256 (") for _, text in progress.seen)
    json.dumps(gr.Dataframe().postprocess(table).model_dump(), allow_nan=False)  # no NaN token
    t = table.set_index(["variant", "seq_len"])
    assert len(table) == 4 and list(table.columns) == views_sweep.sweep_columns(app.DEVICE)
    assert t.loc[("naive", 256), "status"] == "ok" and t.loc[("naive", 256), "CPU µs/fwd"] > 0
    refused = t.loc[("naive", 4096)]
    assert refused["status"] == "refused" and "69 GFLOP per forward" in refused["reason"]
    assert (t.loc["sdpa-cudnn", "status"] == "unavailable").all()
    names = {trace.name for trace in time_fig.data}
    assert {"naive", "naive refused", "sdpa-cudnn unavailable"} <= names
    assert time_fig.layout.xaxis.type == "log" and time_fig.layout.yaxis.type == "log"
    # every y tick labelled in full: 2k and 20k never both read "2"; three at least on each
    for axis in (time_fig.layout.yaxis, memory_fig.layout.yaxis):
        ticks = dict(zip(axis.tickvals, axis.ticktext, strict=True))
        assert len(ticks) >= 3 and len(set(ticks.values())) == len(ticks)
        for value, text in ticks.items():
            scale = {"k": 1e3, "M": 1e6}.get(text[-1], 1)
            assert float(text.rstrip("kM")) * scale == pytest.approx(value)
    assert memory_fig.layout.yaxis.type == "log"
    # the strip of the two variants that missed adds its height: the data keep theirs
    assert memory_fig.layout.height == time_fig.layout.height > 440
    assert list(time_fig.layout.yaxis2.categoryarray) == ["naive", "sdpa-cudnn"]
    with zipfile.ZipFile(zip_path) as zf:
        assert "sweep.csv" in zf.namelist()


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_sweep_table_widths_give_every_column_one(device):
    """The Points table's widths (the browser test reads the headers and the reasons): one per
    column, a CPU's shares filling the page, a GPU's pixels about one desktop page wide."""
    widths = views_sweep.sweep_widths(device)
    columns = views_sweep.sweep_columns(device)
    assert len(widths) == len(columns)
    if device == "cpu":
        assert sum(float(w.rstrip("%")) for w in widths) == 100
    else:
        assert 1000 <= sum(widths) <= 1220
    reason = widths[columns.index("reason")]
    assert reason == max(widths, key=lambda w: float(str(w).rstrip("%")))  # the wrapping one


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(seq_lens="256"), "seq_lens must be a list of whole numbers"),
        (dict(seq_lens=[256.5]), "seq_lens must be whole numbers"),
        (dict(seq_lens=[True]), "seq_lens must be whole numbers"),
        (dict(seq_lens=["256"]), "seq_lens must be whole numbers"),
        (dict(seq_lens=[]), "pick at least one sequence length"),
        (dict(seq_lens=[10**6]), "each seq_len must be between"),
        (dict(seq_lens=[8]), "each seq_len must be between"),
        (dict(seq_lens=[256] * 65), "seq_lens: at most 64 entries, got 65"),
        (dict(seq_lens=[10**400]), "got an integer of about 401 digits"),
        (dict(seq_lens=list(range(256, 256 + 9 * 64, 64))), "each seq_len must be one of"),
        (dict(variants="naive"), "must be a list of variant ids"),
        (dict(variants=["nope"]), "unknown variant"),
        (dict(variants=["naive", "sdpa-math", "sdpa-flash", "naive-inplace", "sdpa-auto"]),
         "variants per sweep"),
        (dict(head_dim=60), "multiple of 8"),
    ],
)  # fmt: skip
def test_sweep_bad_inputs_are_clear_errors(changes, message):
    args = dict(variants=["naive"], seq_lens=[256], dtype="float32", batch=1, heads=2,
                head_dim=32, causal=True)  # fmt: skip
    error = message_of(sweep_tab.sweep, **{**args, **changes}, progress=no_progress)
    assert message in error.message and error.title == "Check the inputs"


@CPU_ONLY
def test_sweep_points_and_job_budget(monkeypatch):
    lens = [256, 512, 1024, 2048, 4096]
    error = message_of(sweep_tab.sweep, ["naive", "sdpa-flash", "sdpa-math"], lens, "float32", 1, 2,
                       32, True, progress=no_progress)  # fmt: skip
    assert "15 points" in error.message and "at most 12" in error.message
    monkeypatch.setattr(job_request, "CPU_MAX_JOB_FLOPS", 1e7)
    error = message_of(sweep_tab.sweep, ["naive"], [256, 512], "float32", 1, 2, 32, True,
                       progress=no_progress)  # fmt: skip
    assert "GFLOP per forward summed over its 2 runs" in error.message


def test_analyze_cpu_only_trace(compared):
    (*_, traces), _ = compared
    summary, launch, operators, kernels, figure, *_why = analyze_tab.analyze(traces["naive"])
    if app.DEVICE == "cpu":
        assert "no GPU events: a CPU-only trace" in summary
        assert "no GPU work" in launch and kernels.empty
    assert "attn_fwd" in set(operators["Operator"]) or len(operators) > 0
    assert bar_count(figure) > 0
