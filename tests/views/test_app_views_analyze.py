"""The Analyse tab's handler on fixtures and hostile uploads, and the Profile tab's launch block
and wiring (tests/views/test_app_views.py: Compare, Diff, Sweep)."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import gradio as gr
import pytest
from gradio.utils import _parse_file_size

import app
from profiling.analysis import columns
from profiling.gantt.spec import FigureSpec, bar_count
from profiling.page import analyze_tab, profile_tab
from profiling.views import shared as views_shared
from tests.conftest import CUDNN, NAIVE, SHAPE_PARAMETERS
from tests.views.test_app_views import SMALL, MiB, message_of, no_progress, write


# -- Analyse -----------------------------------------------------------------------------------
def test_analyze_h200_fixture():
    summary, launch, operators, kernels, figure, *_why = analyze_tab.analyze(str(NAIVE))
    assert "NVIDIA H200 (sm_90, 132 SMs" in summary and "GPU µs / forward" in summary
    assert "per forward: GPU work launched in the 3 attn_fwd spans" in summary
    assert "GPU idle &amp; launch overhead" in launch and "99.1% of" in launch
    assert "cudaLaunchKernel" in launch and "GPU busy" not in summary  # launch rows apart
    assert list(operators.columns) == list(columns.TRACE_OPERATOR_COLUMNS.values())
    assert operators.set_index("Operator").loc["aten::bmm", "Calls"] == 6
    assert list(kernels.columns) == views_shared.kernel_headers() and len(kernels) == 7
    assert isinstance(figure, FigureSpec) and bar_count(figure) == 171


def test_analyze_shows_cudnn_moved_the_cost_to_the_cpu():
    summary, launch, *_ = analyze_tab.analyze(str(CUDNN))
    assert "CPU-bound" in summary and "cuLaunchKernelEx" in launch
    assert "11.4 µs per forward" in launch  # CPU launch time per forward, a number


def gzip_bomb(path: Path, expanded: int) -> str:
    """`expanded` bytes of zeros, gzipped in 1 MiB pieces (a few hundred KB on disk)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
    zeros = b"\0" * MiB
    with open(path, "wb") as fh:
        for _ in range(expanded // MiB):
            fh.write(packer.compress(zeros))
        fh.write(packer.flush())
    return str(path)


def test_gzip_bombs_are_refused_quickly(tmp_path):
    small = gzip_bomb(tmp_path / "zeros.json.gz", 50 * MiB)
    assert Path(small).stat().st_size < MiB
    # made before the clock starts: deflating 3 GiB takes longer than reading it back
    big = gzip_bomb(tmp_path / "big.json.gz", views_shared.TRACE_MAX_EXPANDED_BYTES + 8 * MiB)
    assert "not valid JSON" in message_of(analyze_tab.analyze, small).message
    error = message_of(analyze_tab.analyze, big)
    assert (
        f"expands to more than {views_shared.TRACE_MAX_EXPANDED_BYTES // MiB} MiB" in error.message
        and error.title == "Unreadable trace"
    )  # refused by the expansion limit as it streamed, not read to the end (no wall clock)


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("upload.json", b"hello", "not valid JSON"),
        ("upload.json.gz", b"hello", "named .gz but is not gzip data"),
        ("upload.json", b'{"schemaVersion": 1}', "no `traceEvents` list"),
        ("upload.json", json.dumps({"traceEvents": "nope"}).encode(), "no `traceEvents` list"),
        ("upload.json.gz", b"", "the file is empty"),
        ("upload.json.gz", gzip.compress(b"not json", mtime=0), "not valid JSON"),
        ("upload.json.gz", NAIVE.read_bytes()[:2000], "gzip stream is corrupt"),
    ],
)
def test_analyze_broken_uploads(tmp_path, name, data, message):
    error = message_of(analyze_tab.analyze, write(tmp_path, name, data))
    assert message in error.message and error.title == "Unreadable trace"


def test_analyze_missing_or_oversized_upload(tmp_path, monkeypatch):
    error = message_of(analyze_tab.analyze, None)
    assert "upload a trace" in error.message and error.title == "Check the inputs"
    assert "cannot open" in message_of(analyze_tab.analyze, str(tmp_path / "gone.json")).message
    assert "must be an uploaded file" in message_of(analyze_tab.analyze, 42).message
    monkeypatch.setattr(views_shared, "TRACE_MAX_UPLOAD_BYTES", 1024)
    assert "the limit is 1 KiB" in message_of(analyze_tab.analyze, str(NAIVE)).message


# -- Profile tab: the launch block, and the wiring ---------------------------------------------
def test_profile_strip_carries_the_launch_block():
    strip, summary, *_ = profile_tab.profile(variant="naive", **SMALL, progress=no_progress)
    assert "GPU idle &amp; launch overhead" in strip
    if app.DEVICE == "cpu":
        assert "no GPU work" in strip and summary["launch"]["has_gpu"] is False
        assert summary["launch"]["busy_pct"] is None


def test_upload_limits_agree_with_launch():
    assert (
        _parse_file_size(app.SERVE_OPTIONS["max_file_size"]) == views_shared.TRACE_MAX_UPLOAD_BYTES
    )
    assert views_shared.TRACE_MAX_EXPANDED_BYTES > views_shared.TRACE_MAX_UPLOAD_BYTES


def test_wiring_gpu_jobs_share_one_slot_and_trace_work_has_its_own():
    deps = {fn.api_name: fn for fn in app.demo.fns.values()}
    public = [fn.api_name for fn in app.demo.fns.values() if fn.api_visibility == "public"]
    history = ["history", "history_run", "history_diff", "history_compare", "history_trend"]
    model = ["model", "model_sweep"]  # issue 43's, last
    assert public == ["profile", "compare", "diff", "sweep", "analyze", *history, *model]
    for name in ("profile", "compare", "sweep", *model):  # the model's runs take the GPU slot too
        assert (
            deps[name].concurrency_limit == 1
            and deps[name].concurrency_id == views_shared.GPU_GROUP
        )
    for name in ("diff", "diff_runs", "analyze"):
        assert deps[name].concurrency_limit == views_shared.TRACE_CONCURRENCY
        assert deps[name].concurrency_id == views_shared.TRACE_GROUP != views_shared.GPU_GROUP
    assert deps["diff_runs"].api_visibility == "private"
    ids = lambda fn: [c.elem_id for c in fn.inputs]  # noqa: E731
    shape = SHAPE_PARAMETERS
    compared = ["cmp-variants", "cmp-seq_len", *[f"cmp-{n}" for n in [*shape, "counters"]]]
    assert ids(deps["compare"]) == compared
    assert ids(deps["sweep"]) == ["sw-variants", "sw-lengths", *[f"sw-{n}" for n in shape]]
    assert ids(deps["diff"]) == ["diff-file-a", "diff-file-b", "label-a", "label-b"]
    assert ids(deps["analyze"]) == ["an-file", "an-from", "an-to"]


def test_analyze_window_draws_the_slice_in_full_detail(tmp_path):
    """Issue #7: a large trace is drawn at reduced detail; a chosen window gets one bar per span."""
    from benchmarks import gen_trace
    from profiling.gantt.detail import AGGREGATED
    from profiling.gantt.spec import bar_count, spans_drawn
    from profiling.trace import model as trace_model

    path = gen_trace.write(40_000, tmp_path / "big.json.gz")
    spans = trace_model.load(path).spans
    whole_spec = analyze_tab.analyze(str(path))[4]
    whole = whole_spec.figure()
    assert any(t.legendgroup == AGGREGATED for t in whole.data)
    assert spans_drawn(whole) == len(spans)
    hi = float(spans["end_us"].max()) / 40
    sliced = analyze_tab.analyze(str(path), 0.0, hi)[4].figure()
    inside = int(((spans["end_us"] >= 0) & (spans["start_us"] <= hi)).sum())
    assert bar_count(sliced) == spans_drawn(sliced) == inside
    assert not any(t.legendgroup == AGGREGATED for t in sliced.data)
    untouched = analyze_tab.analyze(str(path), 0, 0)[4].to_json() == whole_spec.to_json()
    assert untouched  # the page's untouched boxes draw the whole trace (a bool: no 1 MB diff)
    for bad in ((5.0, 1.0), (float("nan"), 1.0), ("a", 2.0), (1.0, None)):
        with pytest.raises(gr.Error, match="window"):
            analyze_tab.analyze(str(path), *bad)
    last = float(spans["end_us"].max())
    with pytest.raises(gr.Error, match=r"holds no spans: this trace runs from .* µs"):
        analyze_tab.analyze(
            str(path), last + 1e6, last + 2e6
        )  # past the trace's end: said, not blank


def test_the_role_tables_title_says_in_attention_only_of_attention_kernels():
    """Issue 42, point 3: a recommendation model's trace (V100) was titled "Kernels by role in
    attention"; an attention run's still is. The same rule titles Diff's role table."""
    from profiling.page import diff_tab

    recsys = Path(__file__).parents[1] / "fixtures" / "generated" / "recsys_v100_3steps.json.gz"
    titles = {}
    for name, trace in (("naive", NAIVE), ("recsys", recsys)):
        outputs = analyze_tab.analyze(str(trace))
        roles = outputs[5]
        assert len(roles) > 0, name  # a GPU trace: its kernels have roles
        titles[name] = analyze_tab.title_roles(roles)["label"]
    assert titles == {"naive": "Kernels by role in attention", "recsys": "Kernels by role"}
    _, _, _, roles = diff_tab.diff(str(recsys), str(recsys), "a", "b")
    assert diff_tab.title_roles(roles)["label"] == "By role (µs per window)"
    _, _, _, roles = diff_tab.diff(str(NAIVE), str(CUDNN), "a", "b")
    assert diff_tab.title_roles(roles)["label"] == "By role in attention (µs per window)"
