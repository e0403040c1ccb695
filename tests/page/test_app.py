"""The handlers, called directly: a CPU run returns the page's outputs; bad input is a gr.Error."""

from __future__ import annotations

import ast
import logging
import math
from pathlib import Path

import gradio as gr
import pytest

import app
from profiling.gantt.spec import FigureSpec, bar_count
from profiling.page import compare_tab, profile_tab, sweep_tab
from profiling.run.runner import RunError, VariantUnavailable
from profiling.trace import model as trace
from profiling.trace.events import TraceError
from profiling.views import profile as views_profile
from profiling.views import shared as views_shared
from profiling.workload.request import sweep_lengths
from profiling.workload.spec import page_ranges
from tests.conftest import PROFILE_PARAMETERS, RecordingProgress

SMALL = dict(variant="naive", seq_len=128, dtype="float32", batch=1, heads=2, head_dim=32,
             causal=True)  # fmt: skip


def no_progress(*args, **kwargs) -> None:
    return None


def call(**changes):
    return profile_tab.profile(**{**SMALL, **changes}, progress=no_progress)


@pytest.fixture(scope="module")
def outputs():
    return call()


def test_the_gantt_reaches_gr_plot_as_plotly_json(outputs):
    figure = outputs[5]
    data = gr.Plot().postprocess(figure)
    assert data.type == "plotly" and data.plot == figure.to_json()


def test_valid_cpu_run_returns_every_output(outputs):
    strip, summary, operators, kernels, note, figure, memory, json_btn, gz_btn, txt_btn, *why = (
        outputs
    )
    # the nine outputs, the memory block's page-only state after the Gantt, the role table, the
    # roofline chart and its table last
    assert len(outputs) == 13
    roles, roofline_figure, roofline = why
    assert roles.empty and roofline.empty and roofline_figure.data == []  # a CPU run: no kernels
    assert "Timing, clocks and memory" in strip and "CPU µs / forward, median (IQR)" in strip
    assert summary["timing"] == "eager" and summary["gpu_clocks"]["available"] is False
    assert summary["memory_timeline"] is None  # a CPU run: the allocator's history needs a GPU
    assert "needs a GPU" in memory["note"] and memory["memory"] is None
    assert memory["run"].endswith(".run.json") and Path(memory["run"]).exists()
    assert 'class="ap-strip"' in strip and "CPU µs / forward" in strip
    assert summary["variant"] == "naive" and summary["forwards"] == 3
    assert list(operators.columns) == views_profile.operator_headers(app.DEVICE)
    assert len(views_profile.operator_datatypes(app.DEVICE)) == len(operators.columns)
    calls = dict(zip(operators["Operator"], operators["Calls"], strict=True))
    assert calls["attn_fwd"] == 3
    assert list(kernels.columns) == views_shared.kernel_headers()
    if app.DEVICE == "cpu":
        assert kernels.empty and "CPU run" in note  # no GPU kernels on a CPU
    assert isinstance(figure, FigureSpec) and bar_count(figure) > 0
    paths = [Path(p) for p in (json_btn, gz_btn, txt_btn)]
    assert [p.name.split(".", 1)[1] for p in paths] == ["json", "json.gz", "txt"]
    assert all(p.exists() for p in paths)
    t = trace.load(paths[1])
    assert bar_count(figure) == len(t.spans)
    fwd = t.spans[(t.spans["name"] == "attn_fwd") & (t.spans["kind"] == "cpu")]
    assert len(fwd) == 3


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(seq_len="abc"), "seq_len must be a whole number"),
        (dict(seq_len=math.nan), "seq_len must be a whole number"),
        (dict(seq_len=100.5), "seq_len must be a whole number"),
        # issue 42: the page's range (its sliders'), not the CLI's wider LIMITS
        (
            dict(seq_len=10**12),
            "seq_len must be between {} and {} on this machine".format(
                *page_ranges(app.DEVICE)["seq_len"][:2]
            ),
        ),
        (dict(batch=True), "batch must be a whole number"),
        (dict(heads=-3), "heads must be between"),
        (dict(head_dim=60), "multiple of 8"),
        (dict(variant="nope"), "unknown variant"),
        (dict(variant="../../etc/passwd"), "unknown variant"),
        (dict(variant=None), "variant is missing"),
        (dict(dtype="float64"), "unknown dtype"),
        (dict(causal="maybe"), "causal must be true or false"),
        (dict(seq_len=4096, batch=8, heads=16, head_dim=128), "GFLOP"),
        # issue 31: 0 is not "not set" (the page's empty field sends None or "")
        (dict(kv_heads=0), "kv_heads must be between 1 and 128, got 0; leave kv_heads empty"),
        (dict(window="ten"), "window must be a whole number, got 'ten'; leave window empty"),
    ],
)
def test_bad_inputs_raise_a_clear_gr_error(changes, message):
    if "GFLOP" in message and app.DEVICE != "cpu":
        pytest.skip("the CPU budget applies only on a CPU machine")
    with pytest.raises(gr.Error) as info:
        call(**changes)
    assert message in info.value.message
    assert info.value.title == "Check the inputs"


@pytest.mark.parametrize(("name", "typed"), [("batch", -3), ("seq_len", 100_000), ("heads", 0)])
def test_a_typed_value_out_of_the_pages_range_is_refused_by_name_and_nothing_runs(
    monkeypatch, name, typed
):
    """Issue 42: batch -3 or S 100000 typed into the page ran with B=1 or S=4096 without a word.
    Each job's handler (the API's too) refuses the value with the page's range, and runs nothing."""
    ran = []
    for tab, gpu in ((profile_tab, "profile_on_gpu"), (compare_tab, "compare_on_gpu"),
                     (sweep_tab, "sweep_on_gpu")):  # fmt: skip
        monkeypatch.setattr(tab, gpu, lambda *args, **kwargs: ran.append(args))
    low, high, _ = page_ranges(app.DEVICE)[name]
    said = f"{name} must be between {low} and {high} on this machine, got {typed}"
    shape = {k: v for k, v in {**SMALL, name: typed}.items() if k != "variant"}
    calls = [lambda: call(**{name: typed}),
             lambda: compare_tab.compare(["naive"], **shape, progress=no_progress)]  # fmt: skip
    if name != "seq_len":  # a sweep's lengths are picked from a list (refused there by value)
        points = {k: v for k, v in shape.items() if k != "seq_len"}
        lengths = sweep_lengths(app.DEVICE)[:1]
        calls.append(lambda: sweep_tab.sweep(["naive"], lengths, **points, progress=no_progress))
    for refused in calls:
        with pytest.raises(gr.Error) as info:
            refused()
        assert info.value.message == said and info.value.title == "Check the inputs"
    assert ran == []


def test_empty_optional_fields_are_not_set_whether_none_or_blank_text(monkeypatch):
    """Issue 31: the page's K/V heads, query length and window send "" when empty, an API
    caller None; both mean not set, and a number typed there is read as that number."""
    asked = []

    def read_and_stop(workload, progress):
        asked.append(workload)  # the workload the handler read is all this test needs
        raise RuntimeError("not run")

    monkeypatch.setattr(profile_tab, "profile_on_gpu", read_and_stop)
    for optional in (dict(kv_heads=None), dict(kv_heads="", q_len="  ", window=""),
                     dict(kv_heads=" 1 ", q_len="64", window="8")):  # fmt: skip
        with pytest.raises(gr.Error):
            call(**optional)
    unset = dict(kv_heads=None, q_len=None, window=None)
    assert [{name: getattr(w, name) for name in unset} for w in asked] == [
        unset,
        unset,
        dict(kv_heads=1, q_len=64, window=8),
    ]


@pytest.mark.skipif(app.DEVICE != "cpu", reason="needs a machine without CUDA")
def test_unavailable_variant_says_why():
    with pytest.raises(gr.Error) as info:
        call(variant="sdpa-cudnn", dtype="bfloat16")
    assert "needs a CUDA GPU" in info.value.message
    assert info.value.title == "Variant unavailable"


@pytest.mark.parametrize(
    ("error", "title"),
    [
        (RunError("out of memory on cuda: reduce seq_len"), "The run failed"),
        (VariantUnavailable("kernels-flash-attn2 could not be set up: Hub unreachable"),
         "Variant unavailable"),
        (TraceError("not valid JSON"), "Unreadable trace"),
    ],
)  # fmt: skip
def test_backend_errors_become_gr_errors_with_their_message(monkeypatch, error, title):
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(profile_tab, "run", fail)
    with pytest.raises(gr.Error) as info:
        call()
    assert info.value.message == str(error) and info.value.title == title


def test_unexpected_errors_are_generic_and_logged(monkeypatch, caplog):
    def fail(*args, **kwargs):
        raise KeyError("secret-internal-detail")

    monkeypatch.setattr(profile_tab, "run", fail)
    with caplog.at_level(logging.ERROR, logger="attention_profiler"), pytest.raises(gr.Error) as e:
        call()
    assert e.value.message == views_shared.GENERIC_ERROR
    assert "secret" not in e.value.message
    assert any("secret-internal-detail" in (r.exc_text or "") for r in caplog.records)


def test_unexpected_error_in_the_views_is_generic_too(monkeypatch):
    def broken(result):
        raise ValueError("figure exploded")

    monkeypatch.setattr(views_profile, "page", broken)
    with pytest.raises(gr.Error) as info:
        call()
    assert info.value.message == views_shared.GENERIC_ERROR


def test_progress_is_reported():
    progress = RecordingProgress()
    assert not progress  # as in a real request: the handlers must not test it for truth
    profile_tab.profile(**SMALL, progress=progress)
    seen = progress.seen
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("warm-up" in (d or "") for _, d in seen)
    assert any("export" in (d or "") for _, d in seen)


def test_lesson_and_relabel_handlers():
    assert "masked_fill_" in profile_tab.show_lesson("naive-inplace", "float32")
    dropdown, lesson = profile_tab.relabel_variants("sdpa-flash", "float32")
    assert dropdown.value == "sdpa-flash"
    assert [v for _, v in dropdown.choices] == [
        v for _, v in views_profile.variant_choices(app.DEVICE, "float32")
    ]
    assert "FlashAttention" in lesson


def test_every_variant_picker_shows_the_same_labels():
    """Issue 19, point 2: Compare and Sweep listed ids (`naive`) where Profile listed labels."""
    from attention import VARIANTS
    from profiling.page import controls, listeners

    pickers = {
        block.elem_id: block.choices
        for block in app.demo.blocks.values()
        if getattr(block, "elem_id", None) in ("variant", "cmp-variants", "sw-variants")
    }
    expected = views_profile.variant_choices(app.DEVICE, controls.START["dtype"])
    assert pickers == dict.fromkeys(("variant", "cmp-variants", "sw-variants"), expected)
    assert dict((v, label) for label, v in expected)["naive"] == VARIANTS["naive"].label
    # and after a dtype change
    single, _ = profile_tab.relabel_variants("naive", "float16")
    assert listeners.relabel_multiselect(["naive"], "float16").choices == single.choices


def test_wiring_one_gpu_job_at_a_time():
    deps = {fn.api_name: fn for fn in app.demo.fns.values()}
    profile = deps["profile"]
    assert profile.concurrency_limit == 1 and profile.concurrency_id == views_shared.GPU_GROUP
    assert profile.api_visibility == "public" and profile.trigger_mode == "once"
    names = [c.elem_id for c in profile.inputs]
    assert names == PROFILE_PARAMETERS
    public = [fn.api_name for fn in app.demo.fns.values() if fn.api_visibility == "public"]
    history = ["history", "history_run", "history_diff", "history_compare", "history_trend"]
    model = ["model", "model_sweep"]  # issue 43's, last
    assert public == ["profile", "compare", "diff", "sweep", "analyze", *history, *model]
    for name in model:  # issue 43: device jobs
        assert deps[name].concurrency_id == views_shared.GPU_GROUP
    for name in history:  # the store is read on the CPU: History's calls wait for no GPU job
        assert deps[name].concurrency_id != views_shared.GPU_GROUP
    assert app.demo._queue.max_size == views_shared.QUEUE_MAX_SIZE
    assert app.demo.delete_cache == views_shared.DELETE_CACHE
    assert app.SERVE_OPTIONS["max_file_size"] == views_shared.MAX_FILE_SIZE


def test_backend_errors_are_translated_in_one_place():
    """Only profiling/page/errors.py makes a gr.Error or catches an exception: every handler and
    GPU function of the page goes through it (issue 18, point 5)."""
    root = Path(app.__file__).resolve().parent
    sources = [root / "app.py", *sorted((root / "profiling" / "page").glob("*.py"))]
    assert len(sources) > 5
    for path in sources:
        if path.name == "errors.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Try), f"{path.name}:{node.lineno} catches errors"
            if isinstance(node, ast.Attribute) and node.attr == "Error":
                assert ast.unparse(node) != "gr.Error", f"{path.name}:{node.lineno} makes one"
