"""A model step's split (profiling/analysis/model/step.py) and the padding's cost
(profiling/analysis/model/padding.py), on small traces written here: the categories add up to
the step, a kernel is attention by the span it was launched in, overlap is counted once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from profiling.analysis.model import padding, step
from profiling.trace import model as trace

GPU = {"pid": 0, "tid": 7}


def _trace(kernels: list[tuple], steps: int = 1, launch_tid: int = 1) -> bytes:
    """`steps` model_step spans, each with layer 0 holding an attention and a norm span; each
    kernel (name, start, dur, the span it is launched in[, its stream]) is launched from that
    span, on stream 7 unless it names another."""
    events, correlation = [], 0

    def span(name, cat, start, dur, pid=1, tid=1, **args):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                       "ts": start, "dur": dur, "args": args})  # fmt: skip

    for index in range(steps):
        t0 = index * 1000.0
        span(f"ProfilerStep#{index}", "user_annotation", t0, 900.0)
        span("model_step", "user_annotation", t0 + 1, 800.0)
        span("model_layer_0", "user_annotation", t0 + 2, 300.0)
        span("model_attention", "user_annotation", t0 + 10, 50.0)
        span("model_norm", "user_annotation", t0 + 100, 50.0)
        span("model_layer_1", "user_annotation", t0 + 400, 300.0)
        places = {"model_attention": 20.0, "model_norm": 110.0, None: 200.0, "layer1": 500.0}
        for name, start, dur, where, *stream in kernels:
            correlation += 1
            span("cudaLaunchKernel", "cuda_runtime", t0 + places[where], 1.0,
                 tid=launch_tid if where is None else 1, correlation=correlation)  # fmt: skip
            span(name, "kernel", t0 + start, dur, correlation=correlation,
                 **{**GPU, "tid": stream[0] if stream else GPU["tid"]})  # fmt: skip
    return json.dumps({"traceEvents": events}).encode()


KERNELS = [
    ("sm90_xmma_gemm_bf16", 300.0, 40.0, None),  # a projection
    ("flash_fwd_kernel", 350.0, 30.0, "model_attention"),
    ("sm90_xmma_gemm_bf16", 390.0, 20.0, "model_attention"),  # eager's QKᵀ: attention by span
    ("vectorized_elementwise_kernel", 420.0, 10.0, "model_norm"),
    ("Memcpy DtoD", 440.0, 5.0, None),
    ("vectorized_elementwise_kernel", 450.0, 10.0, None),
    ("cutlass_gemm_tn", 600.0, 50.0, "layer1"),
]


def _split(kernels=KERNELS, steps=1) -> step.StepSplit:
    return step.split_step(trace.load(_trace(kernels, steps)))


def test_categories_add_up_to_the_step_with_idle_gaps():
    split = _split()
    assert split.on_gpu
    assert split.step_us == pytest.approx(350.0)  # 300 → 650
    assert sum(split.categories.values()) == pytest.approx(split.step_us)
    assert split.categories[step.ATTENTION] == pytest.approx(50.0)
    assert split.categories[step.GEMM] == pytest.approx(90.0)
    assert split.categories[step.NORMS] == pytest.approx(10.0)
    assert split.categories[step.COPIES] == pytest.approx(5.0)
    assert split.categories[step.ELEMENTWISE] == pytest.approx(10.0)
    assert split.categories[step.IDLE] == pytest.approx(350.0 - 165.0)
    assert split.attention_share == pytest.approx(50.0 / 350.0)


def test_figures_are_python_floats_that_round_as_they_will_when_read_back():
    """The store keeps them as JSON floats: numpy's round(3894.05, 1) is 3894.0, Python's
    3894.1, so numpy figures would show one number live and another from History."""
    split = _split(steps=3)
    figures = [
        split.step_us,
        *split.categories.values(),
        *(us for _, us in split.attention_kernels),
    ]
    figures += [us for _, total, attention in split.layers for us in (total, attention)]
    assert figures and {type(us) for us in figures} == {float}
    kept = step.StepSplit(np.float64(3894.05), {step.GEMM: np.float64(3894.05)},
                          [(np.int64(0), np.float64(3894.05), np.float64(0.15))], True, 1,
                          [("k", np.float64(0.15))])  # fmt: skip
    assert round(kept.step_us, 1) == round(kept.categories[step.GEMM], 1) == 3894.1
    assert kept.layers == [(0, 3894.05, 0.15)] and round(kept.layers[0][2], 1) == 0.1
    assert round(kept.attention_kernels[0][1], 1) == 0.1


def test_overlapping_kernels_are_counted_once():
    overlapping = [*KERNELS, ("sm90_xmma_gemm_bf16", 310.0, 20.0, None)]  # inside the first
    split = _split(overlapping)
    assert split.categories[step.GEMM] == pytest.approx(90.0)
    assert sum(split.categories.values()) == pytest.approx(split.step_us)


def test_attention_share_per_layer_and_per_step():
    split = _split(steps=3)
    assert split.steps == 3
    assert split.step_us == pytest.approx(350.0)
    layers = [(index, round(total), round(attention)) for index, total, attention in split.layers]
    assert layers == [(0, 115, 50), (1, 50, 0)]
    assert split.attention_kernels[0] == ("flash_fwd_kernel", pytest.approx(30.0))


def test_a_backward_thread_s_kernels_count_in_the_step():
    """A GPU train step's backward launches from autograd's thread, inside the step's span."""
    split = step.split_step(trace.load(_trace(KERNELS, launch_tid=2)))
    assert split.categories[step.GEMM] == pytest.approx(90.0)
    assert sum(split.categories.values()) == pytest.approx(split.step_us)


def test_a_trace_without_model_steps_is_refused():
    data = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
                                        "pid": 1, "tid": 1, "ts": 0, "dur": 5}]})  # fmt: skip
    with pytest.raises(ValueError, match="no model_step span"):
        step.split_step(trace.load(data.encode()))


def _times(kernels, steps=1):
    return step.step_times(trace.load(_trace(kernels, steps)))


def test_busy_merges_two_streams_overlap_once_and_leaves_gaps_out():
    """Two streams' kernels overlapping by 20 µs, then a 40 µs gap, then one more kernel."""
    times = _times([("a", 300.0, 40.0, None, 7), ("b", 320.0, 40.0, None, 8),
                    ("c", 400.0, 10.0, "layer1", 7)])  # fmt: skip
    row = times.iloc[0]
    assert row["span_us"] == pytest.approx(110.0)  # 300 → 410
    assert row["busy_us"] == pytest.approx(70.0)  # [300, 360) ∪ [400, 410)
    assert row["work_sum_us"] == pytest.approx(90.0)
    assert row["work_items"] == 3 and row["step_us"] == pytest.approx(800.0)


def test_busy_counts_nested_kernels_once():
    times = _times([("outer", 300.0, 100.0, None, 7), ("inner", 310.0, 10.0, None, 8),
                    ("inner", 350.0, 10.0, "model_norm", 9)])  # fmt: skip
    assert times["busy_us"].tolist() == [pytest.approx(100.0)]
    assert times["work_sum_us"].tolist() == [pytest.approx(120.0)]


def test_each_step_has_its_own_busy_time_and_the_split_agrees():
    times = _times(KERNELS, steps=3)
    assert times.columns.tolist() == list(step.STEP_TIME_COLUMNS)
    assert len(times) == 3 and (times["work_items"] == len(KERNELS)).all()
    assert times["span_us"].tolist() == [pytest.approx(350.0)] * 3
    assert times["busy_us"].tolist() == [pytest.approx(165.0)] * 3
    split = _split(steps=3)
    assert split.step_us - split.categories[step.IDLE] == pytest.approx(times["busy_us"].mean())


def test_a_cpu_step_has_its_span_and_no_gpu_time():
    data = json.dumps({"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "model_step", "pid": 1, "tid": 1, "ts": 0,
         "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 5},
    ]})  # fmt: skip
    times = step.step_times(trace.load(data.encode()))
    assert times.to_dict("records") == [
        {"step_us": 50.0, "span_us": 0.0, "busy_us": 0.0, "work_sum_us": 0.0, "work_items": 0}
    ]


SHAPE = padding.Shape(hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16, vocab=512,
                      layers=2)  # fmt: skip


def test_padding_costs_by_implementation():
    lengths = [64, 40, 16]
    eager = padding.pad_figures(SHAPE, 64, lengths, "eager")
    sdpa = padding.pad_figures(SHAPE, 64, lengths, "sdpa")
    flex = padding.pad_figures(SHAPE, 64, lengths, "flex_attention")
    varlen = padding.pad_figures(SHAPE, 64, lengths, "kernels")
    assert eager.pad_tokens == varlen.pad_tokens == 3 * 64 - 120
    # the varlen path spends nothing on pads in attention: only the GEMMs over pad positions
    assert varlen.pad_flops == pytest.approx(padding.dense_flops(SHAPE, 72))
    assert varlen.pad_flops < flex.pad_flops < sdpa.pad_flops == eager.pad_flops
    # a full batch: SDPA's fused backends compute the causal half, eager the full square
    full_sdpa = padding.pad_figures(SHAPE, 64, [64, 64], "sdpa")
    full_eager = padding.pad_figures(SHAPE, 64, [64, 64], "eager")
    assert full_sdpa.pad_tokens == 0 and full_sdpa.flops < full_eager.flops
    assert padding.causal_pairs(4, 4) == 10 and padding.causal_pairs(1, 5) == 5
