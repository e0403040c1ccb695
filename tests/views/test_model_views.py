"""The Model tab's views (profiling/views/model/): the "which attn_implementation?" table, the
categories, attention per layer and SDPA's reasons, from a ModelRun made here (plain data)."""

from __future__ import annotations

import json

import pytest

from profiling.analysis.model.padding import PadFigures
from profiling.analysis.model.step import ATTENTION, CATEGORIES, GEMM, IDLE, StepSplit
from profiling.run.model.result import ImplementationRun, ModelRun, SdpaAccount
from profiling.views.model import table, why


def _split(step_us: float, attention: float) -> StepSplit:
    categories = dict.fromkeys(CATEGORIES, 0.0)
    categories.update({ATTENTION: attention, GEMM: step_us - attention - 10.0, IDLE: 10.0})
    return StepSplit(step_us, categories, [(0, step_us / 2, attention / 2)] * 2)


ACCOUNT = SdpaAccount(
    "q (4, 32, 4096, 128) k (4, 8, 4096, 128) bfloat16, mask (4, 1, 4096, 4096) bool, "
    "is_causal=False, enable_gqa=True",
    "cudnn",
    [("flash", False, ("Flash attention does not support a non-null attn_mask.",)),
     ("efficient", True, ()), ("cudnn", True, ())],
)  # fmt: skip
PAD = PadFigures("sdpa", 6728, 16384, 40.0, 100.0)
RUN = ModelRun(
    {}, "llama-3.1-8b ×2 layers B4 S4096", "cuda", 0.5,
    [
        ImplementationRun("eager", ran="eager", split=_split(90_000.0, 60_000.0), timed_ms=91.0,
                          logits_error=3e-3, pad=PAD),
        ImplementationRun("sdpa", ran="sdpa", split=_split(38_000.0, 7_000.0), timed_ms=38.5,
                          backend="cudnn", sdpa=ACCOUNT, logits_error=4e-3, pad=PAD,
                          attention_kernels=[("cudnn_sdpa_sm90_flash_fprop", 7000.0)]),
        ImplementationRun("kernels", refused="kernels: FlashAttention supports only float16"),
        ImplementationRun("flex_attention", failed="flex_attention failed: RuntimeError: boom"),
    ],
)  # fmt: skip


def test_the_table_names_the_fastest_and_says_why_the_others_did_not_run():
    shown = table.comparison(RUN)
    assert list(shown["implementation"]) == ["eager", "sdpa", "kernels", "flex_attention"]
    sdpa = shown.set_index("implementation").loc["sdpa"]
    assert sdpa["× eager"] == pytest.approx(90 / 38, abs=0.01)
    assert sdpa["attention %"] == pytest.approx(100 * 7 / 38, abs=0.1)
    assert sdpa["SDPA backend"] == "cudnn" and sdpa["pad FLOPs %"] == 40.0
    assert "tokens/s" not in shown.columns  # a prefill has none
    assert "supports only float16" in shown.set_index("implementation").loc["kernels", "ran"]
    assert table.verdict(RUN).startswith("which attn_implementation? sdpa: 38.00 ms")


def test_categories_add_up_and_layers_give_attention_s_share():
    categories = table.categories(RUN)
    for _, row in categories.iterrows():
        assert sum(row[name] for name in CATEGORIES) == pytest.approx(row["step µs"])
    layers = table.layers(RUN)
    assert list(layers[layers["implementation"] == "eager"]["attention %"]) == [66.7, 66.7]


def test_why_says_the_backend_the_call_and_torch_s_words():
    text = why.text(RUN)
    assert "the trace shows SDPA's cudnn backend ran" in text
    assert "mask (4, 1, 4096, 4096) bool, is_causal=False" in text
    assert "flash refuses: Flash attention does not support a non-null attn_mask." in text
    assert "efficient accepts" in text
    assert "sdpa: attention ran cudnn_sdpa_sm90_flash_fprop (7000.0 µs)" in text
    assert "refused: kernels:" in text and "failed: flex_attention failed" in text


DECODE = ModelRun(
    {"mode": "decode"}, "llama-3.1-8b ×2 layers B4 S4096 decode 64", "cuda", 0.5,
    [
        ImplementationRun("eager", ran="eager", split=_split(300_000.0, 30_000.0), timed_ms=214.0),
        ImplementationRun("sdpa", ran="sdpa", split=_split(320_000.0, 30_000.0), timed_ms=224.0),
        ImplementationRun("kernels", ran="kernels", split=_split(290_000.0, 5_000.0),
                          timed_ms=280.0),
    ],
)  # fmt: skip


def test_a_decode_is_ranked_by_its_bare_timing_and_says_the_profiler_lengthened_it():
    # The trace ranks kernels first (290 ms); without the profiler eager is the fastest (214).
    assert table.verdict(DECODE).startswith("which attn_implementation? eager: 214.00 ms")
    assert "timed without the profiler" in table.verdict(DECODE)
    assert "slowest kernels: 280.00 ms" in table.verdict(DECODE)
    said = why.lines(DECODE)
    assert (
        "eager: the profiled step took 300.00 ms, the same step without the profiler "
        "214.00 ms (+40%)" in "\n".join(said)
    )
    assert (
        sum("bare timing is the one to quote" in line for line in said) == 2
    )  # not kernels: +3.6%


def test_a_step_the_profiler_left_alone_says_nothing_of_it():
    # prefill: 90 ms traced, 91 bare (within 5%): no line; the verdict reads the trace
    assert not any("profiled step took" in line for line in why.lines(RUN))
    assert "from the trace" in table.verdict(RUN)
    stretched = ImplementationRun("eager", split=_split(95_600.0, 1.0), timed_ms=91.0)
    assert why.timing_lines(stretched)  # 1.0505: just past the 5%
    assert not why.timing_lines(ImplementationRun("eager", split=_split(95_500.0, 1.0),
                                                  timed_ms=91.0))  # fmt: skip


def _host_bound(step_us: float, idle_us: float, attention: float) -> StepSplit:
    """A GPU decode step as the H100 traced it: mostly idle gaps waiting for launches."""
    categories = dict.fromkeys(CATEGORIES, 0.0)
    categories.update({ATTENTION: attention, GEMM: step_us - idle_us - attention, IDLE: idle_us})
    busy = step_us - idle_us
    return StepSplit(step_us, categories, [(i, busy / 2, attention / 2) for i in (0, 1)])


# docs/results-model.md: Llama-3.1-8B 2 layers, B4 S4096 ragged, 64-token decode on an H100
BUSY_DECODE = ModelRun(
    {"mode": "decode"}, "llama-3.1-8b ×2 layers B4 S4096 decode 64", "cuda", 0.5,
    [
        ImplementationRun("eager", ran="eager", split=_host_bound(346_100.0, 223_270.0, 9_000.0),
                          timed_ms=316.66, tokens_per_s=808.0),
        ImplementationRun("sdpa", ran="sdpa", split=_host_bound(520_510.0, 406_980.0, 8_000.0),
                          timed_ms=222.71, tokens_per_s=1149.0),
        ImplementationRun("kernels", ran="kernels",
                          split=_host_bound(996_710.0, 917_710.0, 4_000.0), timed_ms=504.48,
                          tokens_per_s=507.0),
    ],
)  # fmt: skip


def test_a_host_bound_decode_shows_the_gpu_busy_time_beside_its_wall():
    shown = table.comparison(BUSY_DECODE).set_index("implementation")
    for item in BUSY_DECODE.runs:  # busy = the traced step less its idle gaps
        split = item.split
        row = shown.loc[item.id]
        assert row[table.BUSY] == pytest.approx((split.step_us - split.categories[IDLE]) / 1e3)
        assert row[table.IDLE_SHARE] == pytest.approx(100 * split.categories[IDLE] / split.step_us,
                                                      abs=0.05)  # fmt: skip
    assert shown.loc["sdpa", table.BUSY] == pytest.approx(113.53)
    assert shown.loc["sdpa", "step ms (trace)"] == pytest.approx(520.51)  # still there, by name
    assert shown.loc["sdpa", "timed ms"] == pytest.approx(222.71)
    assert shown.loc["sdpa", "× eager"] == pytest.approx(316.66 / 222.71, abs=0.01)  # by wall
    said = table.verdict(BUSY_DECODE)
    assert said.startswith("which attn_implementation? sdpa: 222.71 ms")  # ranked by its wall
    assert "slowest kernels: 504.48 ms" in said
    assert "sdpa 113.53 ms (78% of the traced step idle, 51% of its 222.71 ms wall)" in said
    assert "the traced step is not the GPU's time" in said and "CUDA-graph replay" in said
    lines = "\n".join(why.lines(BUSY_DECODE))
    assert "sdpa: the profiled step took 520.51 ms" in lines
    assert "the GPU was busy 113.53 ms of the profiled step" in lines


def test_a_gpu_bound_step_shows_no_busy_time_and_a_mostly_idle_one_does():
    assert table.BUSY not in table.comparison(RUN).columns  # prefill, 10 µs idle of 90 ms
    assert "\n" not in table.verdict(RUN)
    idle = ModelRun({}, "a prefill waiting on launches", "cuda", 0.1, [
        ImplementationRun("sdpa", ran="sdpa", split=_host_bound(10_000.0, 2_500.0, 1_000.0)),
    ])  # fmt: skip
    assert table.comparison(idle).loc[0, table.BUSY] == pytest.approx(7.5)
    assert "sdpa 7.50 ms (25% of the traced step idle)" in table.verdict(idle)
    cpu = ModelRun({"mode": "decode"}, "a CPU decode", "cpu", 0.1, [
        ImplementationRun("sdpa", ran="sdpa", timed_ms=5.0, split=StepSplit(
            6_000.0, dict.fromkeys(CATEGORIES, 1_000.0), [], on_gpu=False)),
    ])  # fmt: skip
    assert table.BUSY not in table.comparison(cpu).columns  # no GPU: nothing to say of one
    assert "GPU busy" not in table.verdict(cpu) and "GPU was busy" not in why.text(cpu)


def test_a_stored_host_bound_run_shows_its_busy_time_as_a_card():
    from profiling.store.model_summary import model_run, summary_of
    from profiling.views.model.stored import strip_html

    one = ModelRun(BUSY_DECODE.workload, BUSY_DECODE.text, "cuda", 0.5, [BUSY_DECODE.runs[1]])
    stored = model_run(json.loads(json.dumps(summary_of(one, one.runs[0]))))  # as kept
    assert table.comparison(stored).equals(table.comparison(one))
    assert table.comparison(stored).loc[0, table.BUSY] == pytest.approx(113.53)
    assert table.verdict(stored) == table.verdict(one)
    assert "GPU busy (trace)" in strip_html(one) and "113.530 ms" in strip_html(one)
    assert "78.2 % of the traced step" in strip_html(one)
    assert "GPU busy" not in strip_html(ModelRun({}, RUN.text, "cuda", 0.5, [RUN.runs[1]]))


def test_a_sweep_of_host_bound_points_shows_their_busy_time():
    from types import SimpleNamespace

    decode = SimpleNamespace(seq_len=4096, result=BUSY_DECODE, refused=None)
    shown = table.sweep([decode, SimpleNamespace(seq_len=8192, result=None, refused="too long")])
    assert list(shown[table.BUSY][:3]) == pytest.approx([122.83, 113.53, 79.0])
    assert shown.loc[3, "ran"] == "too long"
    prefill = table.sweep([SimpleNamespace(seq_len=4096, result=RUN, refused=None)])
    assert table.BUSY not in prefill.columns  # GPU-bound: the span is the GPU's time
