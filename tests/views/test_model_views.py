"""The Model tab's views (profiling/views/model/): the "which attn_implementation?" table, the
categories, attention per layer and SDPA's reasons, from a ModelRun made here (plain data)."""

from __future__ import annotations

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
