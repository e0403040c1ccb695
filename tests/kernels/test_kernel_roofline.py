"""The per-kernel roofline: hand-computed FLOP and byte counts, the bound rule, the chart.

Every expected figure is worked out in the comment above it, from the formulas in the
docstrings of profiling.kernels.work and profiling.kernels.shapes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from attention.masks import visible_pairs
from profiling.analysis.peaks import peak_tflops, roof_label, roofs
from profiling.kernels.names import decode
from profiling.kernels.roofline import (
    NEITHER,
    AttentionShape,
    kernel_bound,
    kernel_roof,
    kernel_work,
    role_work,
    roofline_rows,
)
from profiling.kernels.shapes import args_work, causal_pairs, shape_work
from profiling.views.roofline_figure import log_ticks, marker_sizes, roofline_spec

FIXTURES = Path(__file__).parents[1] / "fixtures"
H200 = "NVIDIA H200"
FWD, BWD = "attn_fwd", "attn_bwd"
NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
MATH_GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma"
SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float>"
BF16_MUL = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >"
)
FLASH_FWD = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>"
FLASH_BWD = "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Traits<64>>"
SPLITKV = "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64>>"
COMBINE = "void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128>>"
MEMCPY, MEMSET = "Memcpy DtoD (Device -> Device)", "Memset (Device)"

# B8 H16 T1024 D64 bf16, causal: 128 batch × heads; N = 8·16·1024·1024 = 134,217,728 scores
PREFILL = AttentionShape.from_numbers(8, 16, 1024, 64, 2, visible_pairs=1024 * 1025 // 2)
SCORES = 8 * 16 * 1024 * 1024
# decode: B16, 32 query heads over 8 K/V heads, 1 query against 8192 keys, D128 bf16
DECODE = AttentionShape.from_numbers(
    16, 32, 8192, 128, 2, key_heads=8, queries=1, visible_pairs=visible_pairs(1, 8192, True, None)
)


def test_naive_qk_gemm():
    # FLOPs 2·B·H·Tq·Tk·D = 2·8·16·1024·1024·64 = 17,179,869,184
    # bytes 128·(Tq·D + Tk·D + Tq·Tk)·2 = 128·(65,536 + 65,536 + 1,048,576)·2 = 301,989,888
    work = role_work("QKᵀ", NVJET, FWD, PREFILL)
    assert (work.flops, work.bytes) == (17_179_869_184, 301_989_888)
    assert work.source == "GEMM formula (workload)"
    assert role_work("PV", NVJET, FWD, PREFILL) == work  # reads P and V, writes the output


def test_sdpa_math_gemm_is_counted_in_fp32():
    # the math backend upcasts: same FLOPs, 4-byte elements: 128·1,179,648·4 = 603,979,776
    work = role_work("matmul", MATH_GEMM, FWD, PREFILL)
    assert (work.flops, work.bytes) == (17_179_869_184, 603_979_776)


def test_softmax_and_scale_over_the_scores():
    # softmax forward: 5 FLOPs per score = 671,088,640; read + write bf16: 2·N·2 = 536,870,912
    forward = role_work("softmax", SOFTMAX, FWD, PREFILL)
    assert (forward.flops, forward.bytes) == (5 * SCORES, 536_870_912)
    # backward: 4 per score; reads y and dy, writes dx: 3·N·2 = 805,306,368
    backward = role_work("softmax", SOFTMAX.replace("forward", "backward"), BWD, PREFILL)
    assert (backward.flops, backward.bytes) == (4 * SCORES, 805_306_368)
    # a bf16 mul (MulFunctor<float> is its math type, not its data): 1 FLOP, 2·N·2 bytes
    scale = role_work("scale", BF16_MUL, FWD, PREFILL)
    assert (scale.flops, scale.bytes) == (SCORES, 536_870_912)
    # a cast has one fp32 side: N·(4 + 2) = 805,306,368
    assert role_work("cast/upcast", "direct_copy_kernel", FWD, PREFILL).bytes == 805_306_368


def test_fused_forward_causal_counts_visible_pairs():
    # pairs T(T+1)/2 = 524,800; FLOPs 4·D·pairs·B·H = 4·64·524,800·128 = 17,196,646,400
    # bytes q, k, v, o: 4·(8·16·1024·64)·2 = 4·8,388,608·2 = 67,108,864
    assert PREFILL.visible_pairs == visible_pairs(1024, 1024, True, None) == 524_800
    work = role_work("fused attention forward", FLASH_FWD, FWD, PREFILL)
    assert (work.flops, work.bytes) == (17_196_646_400, 67_108_864)
    assert work.source == "attention formula (workload)"


def test_decode_is_bound_by_reading_k_and_v():
    # FLOPs 4·D·Tk per head: 4·128·8192·(16·32) = 2,147,483,648
    # bytes q, o: 2·16·32·1·128 = 131,072; k, v: 2·16·8·8192·128 = 268,435,456; ×2 bytes
    #   = 537,133,056 → 3.998 FLOP/byte, far left of the H200's ridge (206)
    work = role_work("fused attention forward", SPLITKV, FWD, DECODE)
    assert (work.flops, work.bytes) == (2_147_483_648, 537_133_056)
    assert 1 < work.flops / work.bytes < 8


def test_backward_convention():
    forward = role_work("fused attention forward", FLASH_FWD, FWD, PREFILL)
    fused = role_work("dQ/dK/dV", FLASH_BWD, BWD, PREFILL)
    # 2.5 × the forward's FLOPs; reads q, k, v, o, dO and writes dq, dk, dv: 2 × the forward
    assert fused.flops == 2.5 * forward.flops and fused.bytes == 2 * forward.bytes
    # an unfused backward GEMM (dP, dV, dQ or dK) is counted as one GEMM of QKᵀ's size
    assert role_work("dQ/dK/dV", NVJET, BWD, PREFILL) == role_work("QKᵀ", NVJET, FWD, PREFILL)
    # delta = rowsum(dO∘O): 2 FLOPs per element of dO; reads dO, O, writes a float per row:
    # 2·8,388,608 FLOPs; 2·8,388,608·2 + 8·16·1024·4 = 33,554,432 + 524,288 bytes
    pre = role_work("backward pre-processing", "flash_bwd_dot_do_o_kernel", BWD, PREFILL)
    assert (pre.flops, pre.bytes) == (16_777_216, 34_078_720)


def test_memcpy_and_memset_bytes_from_the_profiler():
    # a DtoD copy reads and writes its bytes (the scores' clone: 268,435,456 → 2×)
    copy = role_work("copy", MEMCPY, FWD, PREFILL, {"bytes": 268_435_456})
    assert (copy.flops, copy.bytes, copy.source) == (0.0, 536_870_912, "profiler: bytes")
    assert role_work("workspace", MEMSET, FWD, PREFILL, {"bytes": 4}).bytes == 4  # written once
    assert (
        role_work("copy", "Memcpy HtoD (Pinned -> Device)", FWD, PREFILL, {"bytes": 8}).bytes == 8
    )


def _ops(fixture: str, name: str) -> list[dict]:
    with gzip.open(FIXTURES / fixture) as handle:
        events = json.load(handle)["traceEvents"]
    return [e.get("args", {}) for e in events if e.get("cat") == "cpu_op" and e["name"] == name]


def test_recorded_shapes_of_the_user_fixture():
    fixture = "h200_user-naive_8_16_1024_64_bf16.json.gz"
    bmm = _ops(fixture, "aten::bmm")[0]
    assert bmm["Input Dims"] == [[128, 1024, 64], [128, 64, 1024]]
    assert "flops" not in bmm  # torch 2.11 writes none even with with_flops=True
    # 2·128·1024·64·1024 = 17,179,869,184; reads 2·128·1024·64·2 = 33,554,432,
    # writes 128·1024·1024·2 = 268,435,456: 301,989,888 (the GEMM formula's count)
    work = args_work("aten::bmm", bmm)
    assert (work.flops, work.bytes, work.source) == (17_179_869_184, 301_989_888, "recorded shapes")
    # masked_fill_ in place: reads the scores (268,435,456) and the [1024, 1024] bool mask
    # (1,048,576), writes the scores back (268,435,456) = 537,919,488
    assert (
        args_work("aten::masked_fill_", _ops(fixture, "aten::masked_fill_")[0]).bytes == 537_919_488
    )
    # copy_ (dst, src): src read, dst written: 2·268,435,456
    assert args_work("aten::copy_", _ops(fixture, "aten::copy_")[0]).bytes == 536_870_912
    # _to_copy to float (ScalarType 6) of a [2, 3] bf16: reads 6·2 = 12, writes 6·4 = 24 bytes
    cast = shape_work("aten::_to_copy", [[2, 3], []], ["c10::BFloat16", "Scalar"], ["", "6"])
    assert cast.bytes == 36 and cast.flops == 0
    # a recorded "flops" arg wins for the FLOPs
    assert args_work("aten::bmm", {**bmm, "flops": 123}).flops == 123


def test_recorded_sdpa_call_uses_the_attention_formula():
    fixture = "h200_user-sdpa_8_16_1024_64_bf16.json.gz"
    args = _ops(fixture, "aten::_cudnn_attention_forward")[0]  # is_causal 'True' at index 10
    work = args_work("aten::_cudnn_attention_forward", args)
    assert (work.flops, work.bytes) == (17_196_646_400, 67_108_864)  # as the fused forward
    not_causal = list(args["Concrete Inputs"])
    not_causal[10] = "False"
    full = shape_work(
        "_cudnn_attention_forward", args["Input Dims"], args["Input type"], not_causal
    )
    assert full.flops == 4 * 64 * 1024 * 1024 * 128


@pytest.mark.parametrize("queries,keys", [(1, 8192), (7, 5), (5, 7), (64, 64), (100, 30)])
def test_causal_pairs_match_the_masks(queries, keys):
    assert causal_pairs(queries, keys, bottom_right=True) == visible_pairs(
        queries, keys, True, None
    )
    top_left = sum(min(i + 1, keys) for i in range(queries))  # query i sees keys ≤ i
    assert causal_pairs(queries, keys, bottom_right=False) == top_left


def test_what_cannot_be_placed_says_why():
    for work in (
        role_work("split-KV combine", COMBINE, FWD, DECODE),
        role_work("copy", "direct_copy_kernel", FWD, PREFILL),  # no bytes in its args
        role_work("", "some_kernel", FWD, PREFILL),
        kernel_work("softmax", SOFTMAX, FWD, None, ops=("aten::_softmax",)),  # an upload, no dims
        role_work(
            "scale",
            BF16_MUL,
            FWD,
            PREFILL,
            ops=("aten::mul", "aten::_scaled_dot_product_attention_math"),
        ),
    ):
        assert work.flops is None and work.bytes is None and work.source.startswith("not placed: ")
    assert "splits" in role_work("split-KV combine", COMBINE, FWD, DECODE).source
    assert shape_work("aten::sum", [[4, 4]], ["float"]) is None  # no rule for a reduction


def test_kernel_work_prefers_the_best_source():
    bmm = _ops("h200_user-naive_8_16_1024_64_bf16.json.gz", "aten::bmm")[0]
    assert (
        kernel_work("QKᵀ", NVJET, FWD, None, ops=("aten::bmm",), op_args=bmm).source
        == "recorded shapes"
    )
    assert kernel_work("QKᵀ", NVJET, FWD, PREFILL).source == "GEMM formula (workload)"
    memcpy = kernel_work("copy", MEMCPY, FWD, None, {"bytes": 10}, ("aten::copy_",), bmm)
    assert memcpy.source == "profiler: bytes"


def test_bound_rule():
    # H200 bf16: ridge 989.4 / 4.8 = 206 FLOP/byte
    peak, bandwidth = 989.4, 4.8
    # fused forward: 17.2 GFLOP, 67 MB in 50 µs → 344 TFLOP/s (35%), 256 FLOP/byte: compute
    assert kernel_bound(17_196_646_400, 67_108_864, 50e-6, peak, bandwidth) == "compute"
    # softmax: 0.67 GFLOP, 537 MB in 200 µs → 2.7 TB/s (56%), 1.25 FLOP/byte: memory
    assert kernel_bound(671_088_640, 536_870_912, 200e-6, peak, bandwidth) == "memory"
    # a 4-byte memset in 0.75 µs: near no roof
    assert kernel_bound(0.0, 4.0, 0.75e-6, peak, bandwidth) == NEITHER
    # just under 10% of the bandwidth (0.47 TB/s) is neither; 10% is memory
    assert kernel_bound(0.0, 0.47e12 * 1e-3, 1e-3, peak, bandwidth) == NEITHER
    assert kernel_bound(0.0, 0.48e12 * 1e-3, 1e-3, peak, bandwidth) == "memory"
    assert kernel_bound(None, None, 1e-3, peak, bandwidth) == "n/a (not placed)"
    # elementwise kernels are held to FP32 on CUDA cores, GEMMs to the dtype's tensor cores
    assert kernel_roof(SOFTMAX, H200, "bfloat16") == ("FP32 (CUDA cores)", 67.0)
    assert kernel_roof(NVJET, H200, "bfloat16") == ("BF16/FP16 tensor cores", 989.4)
    assert kernel_roof(MATH_GEMM, H200, "bfloat16") == ("FP32 (CUDA cores)", 67.0)


def _rows():
    names = [NVJET, NVJET, SOFTMAX, MEMCPY, COMBINE]
    roles = ["QKᵀ", "QKᵀ", "softmax", "copy", "split-KV combine"]
    durations = [80.0, 90.0, 300.0, 120.0, 5.0]
    args = [None, None, None, {"bytes": 268_435_456}, None]
    works = [role_work(r, n, FWD, PREFILL, a) for r, n, a in zip(roles, names, args, strict=True)]
    return roofline_rows(names, durations, roles, [FWD] * 5, works, H200, "bfloat16")


def test_roofline_rows():
    table = _rows()
    assert list(table["kernel"]) == [
        "softmax_warp_forward",
        NVJET,
        "Memcpy DtoD",
        "flash_fwd_splitkv_combine_kernel",
    ]
    gemm = table.set_index("kernel").loc[NVJET]
    # two calls, 85 µs each; 17,179,869,184 FLOP in 85 µs = 202.1 TFLOP/s; 301,989,888 B → 3.55 TB/s
    assert gemm["calls"] == 2 and gemm["mean_us"] == 85.0
    assert gemm["tflops"] == pytest.approx(17_179_869_184 / 85e-6 / 1e12)
    assert gemm["tbps"] == pytest.approx(301_989_888 / 85e-6 / 1e12)
    assert gemm["intensity"] == pytest.approx(56.89, abs=0.01) and gemm["bound"] == "memory"
    combine = table.iloc[-1]
    assert combine["bound"] == "n/a (not placed)" and combine["source"].startswith("not placed")
    with pytest.raises(ValueError):
        roofline_rows([NVJET], [1.0, 2.0], ["QKᵀ"], [FWD], [], H200, "bfloat16")


def test_peaks_roofs_include_tf32():
    assert roofs(H200) == [
        ("FP32 (CUDA cores)", 67.0),
        ("TF32 tensor cores", 494.7),
        ("BF16/FP16 tensor cores", 989.4),
    ]
    assert (
        peak_tflops("NVIDIA H100 PCIe", "tf32") == 378.0 and peak_tflops("Tesla T4", "tf32") is None
    )
    assert roofs("Tesla T4") == [("FP32 (CUDA cores)", 8.1), ("FP16 tensor cores", 65.0)]
    assert roof_label(H200, "float16") == "BF16/FP16 tensor cores" and roofs("CPU") == []


def test_roofline_figure():
    table = _rows()
    first, second = table.assign(variant="naive"), table.assign(variant="other")
    spec = roofline_spec(pd.concat([first, second], ignore_index=True), H200, "bfloat16")
    assert spec.layout["xaxis"]["type"] == spec.layout["yaxis"]["type"] == "log"
    lines = {t["name"]: t for t in spec.data if t["mode"] == "lines"}
    assert set(lines) == {
        "memory 4.8 TB/s",
        "FP32 (CUDA cores) 67 TFLOP/s",
        "TF32 tensor cores 494.7 TFLOP/s",
        "BF16/FP16 tensor cores 989.4 TFLOP/s",
    }
    assert lines["BF16/FP16 tensor cores 989.4 TFLOP/s"]["line"]["dash"] == "solid"
    assert lines["TF32 tensor cores 494.7 TFLOP/s"]["line"]["dash"] == "dot"
    assert lines["memory 4.8 TB/s"]["y"][0] == pytest.approx(4.8 * lines["memory 4.8 TB/s"]["x"][0])
    points = [t for t in spec.data if t["mode"] == "markers"]
    assert [t["name"] for t in points] == ["naive", "other"]
    assert points[0]["marker"]["color"] != points[1]["marker"]["color"]
    # the copy (no FLOPs) and the combine (not placed) are off the chart and said to be
    assert len(points[0]["x"]) == 2 and "2 with no FLOPs" in spec.layout["annotations"][0]["text"]
    assert decode(SOFTMAX) in points[0]["text"][0].replace("&lt;", "<").replace("&gt;", ">")
    spec.figure()  # plotly accepts it
    assert (
        "no datasheet roofs"
        in roofline_spec(table, "CPU", "float32").layout["annotations"][0]["text"]
    )


def test_an_empty_rooflines_y_axis_has_a_few_round_ticks():
    """Issue 31: with no kernel and no roof (a CPU run), plotly labelled the axis's one decade
    every 0.2 and the labels near its top overlapped; on the H200 the axis spans decades.
    (Issue 42: a chart with no kernel at all now draws no axes and says why.)"""
    one_decade = log_ticks(1 / 3, 3)  # the range of a chart whose points all sit near 1
    assert one_decade["tickvals"] == [0.5, 1.0, 2.0] and one_decade["ticktext"] == ["0.5", "1", "2"]
    empty = roofline_spec(_rows().iloc[0:0], "CPU", "float32").layout
    assert empty["yaxis"] == {"visible": False} and "No roofline" in empty["annotations"][0]["text"]
    wide = roofline_spec(_rows(), H200, "bfloat16").layout["yaxis"]
    low, high = (10**end for end in wide["range"])
    assert 3 <= len(wide["tickvals"]) <= 10 and low <= min(wide["tickvals"])
    assert max(wide["tickvals"]) <= high and "1,000" in wide["ticktext"]


def test_marker_sizes_grow_with_time():
    sizes = marker_sizes([1.0, 4.0, 100.0, 0.0])
    assert sizes[3] < sizes[0] < sizes[1] < sizes[2] == 40.0 and sizes[3] == 6.0


def test_the_note_above_the_roofline_wraps_instead_of_running_off_the_chart():
    """Issue 42: the note listing the kernels left off ran on one line past the chart's right
    edge (an A100 trace's long no-FLOP kernel names) and was cut off. Each line now fits a
    700 px chart (100 characters of 11 px text), and the top margin holds them all."""
    rows = _rows()
    copies = rows[pd.to_numeric(rows["flop_per_call"], errors="coerce") == 0].iloc[:1]
    long_names = [f"void split_embedding_backward_codegen_{i}_kernel_cta_per_row_1<float>"
                  for i in range(6)]  # fmt: skip
    many = pd.concat([copies.assign(name=name) for name in long_names], ignore_index=True)
    spec = roofline_spec(pd.concat([rows, many], ignore_index=True), H200, "bfloat16")
    note = spec.layout["annotations"][0]
    lines = note["text"].split("<br>")
    assert len(lines) >= 2 and max(map(len, lines)) <= 100, lines
    assert "split_embedding_backward_codegen_0_kernel_cta_per_row_1" in note["text"]
    assert note.get("yanchor") == "bottom" and note["y"] >= 1  # above the plot, not over it
    assert spec.layout.get("margin", {}).get("t", 0) >= 15 * len(lines) + 40  # under the title
