"""Issue 42, item 8: words that said the wrong thing and output that was noise. Each test reads
what a user reads (a message, a summary row, the CLI's table, a chart's text)."""

from __future__ import annotations

import json

import pytest

from profiling.__main__ import main
from profiling.analysis.analyze import from_trace, summary_rows
from profiling.analysis.diff import windows
from profiling.user_values import ConfigError
from profiling.views.history import picked_ids
from profiling.views.roofline_figure import NO_KERNELS, roofline_spec
from profiling.workload.controls import CONTROLS
from profiling.workload.spec import Workload
from tests.conftest import from_document


@pytest.mark.parametrize(
    ("at_least", "at_most", "said"),
    [(1, 1, "pick one run (got 2)"), (2, 2, "pick two runs (got 3)")],
)
def test_a_wrong_number_of_picks_is_said_in_words_that_agree(at_least, at_most, said):
    with pytest.raises(ConfigError) as refused:
        picked_ids(["a", "b", "c"][: at_least + 1], at_least, at_most)
    assert str(refused.value) == said  # was "pick exactly 1 different runs (got 2)"


def _one_step():
    event = {"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 10, "cat": "user_annotation",
             "pid": 1, "tid": 1}  # fmt: skip
    return from_document({"traceEvents": [event]})


def test_one_profiler_step_is_one_profiler_step():
    _, scope, _ = windows(_one_step())
    assert scope == "1 ProfilerStep (no attn_fwd spans)"  # was "1 ProfilerSteps"


def test_q_lens_control_says_the_range_its_refusals_enforce():
    """The control said "1–64" (a decode's usual length) where the backend takes 1 to S."""
    q_len = next(control for control in CONTROLS if control.name == "q_len")
    for text in (q_len.api, q_len.info, q_len.flag.help):
        assert "1 to S" in text or "1 to seq_len" in text or "1 to the keys'" in text, text
        assert "1–64" not in text.replace("a decode: 1–64", ""), text
    with pytest.raises(ConfigError, match=r"q_len \(5000\) must be at most seq_len \(4096\)"):
        Workload.from_user(seq_len=4096, q_len=5000)
    with pytest.raises(ConfigError) as refused:
        Workload.from_user(seq_len=4096, q_len=0)
    assert "between 1 and" in str(refused.value)


def test_an_optional_fields_refusal_says_how_to_leave_it_unset_in_words():
    with pytest.raises(ConfigError) as refused:
        Workload.from_user(seq_len=1024, window=0)
    assert str(refused.value).endswith("; leave window empty if not needed")
    assert "(None)" not in str(refused.value)


def test_the_summary_names_the_device_the_trace_ran_on_not_every_device_of_its_host():
    props = [{"id": i, "name": "NVIDIA A100-SXM4-40GB", "computeMajor": 8, "computeMinor": 0,
              "numSms": 108, "totalGlobalMem": 42_505_273_344} for i in range(8)]  # fmt: skip
    kernel = {"ph": "X", "name": "ampere_sgemm_128x64_nn", "ts": 5, "dur": 3, "cat": "kernel",
              "pid": 3, "tid": 7, "args": {"device": 3}}  # fmt: skip
    document = {"deviceProperties": props, "traceEvents": [kernel]}
    trace = from_document(json.loads(json.dumps(document)))
    rows = dict(summary_rows(from_trace(trace), trace))
    assert [label for label in rows if label.startswith("device")] == ["device 3"]


def test_a_cpu_compare_prints_no_empty_gpu_columns(tmp_path, capsys):
    rc = main(["compare", "--variants", "naive", "--seq-len", "64", "--batch", "1", "--heads",
               "2", "--head-dim", "32", "--dtype", "float32", "--device", "cpu", "--no-store",
               "--out", str(tmp_path)])  # fmt: skip
    assert rc == 0
    header = capsys.readouterr().out.splitlines()[1].split()
    assert header[:2] == ["variant", "CPU"]
    for gpu_only in ("kernels/fwd", "GPU", "bound", "peak", "%", "busy", "delay", "launch"):
        assert gpu_only not in header, header


def test_an_empty_roofline_says_why_it_is_empty():
    cpu = _one_step()
    figure = roofline_spec(from_trace(cpu).roofline, "CPU", "float32")
    assert figure.data == []
    assert figure.layout["annotations"][0]["text"] == NO_KERNELS
    assert figure.layout["xaxis"] == {"visible": False}  # no log axes over nothing
