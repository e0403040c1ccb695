"""Kernels launched through a generic entry point (issue 42): CUTLASS's `cutlass::Kernel<…>`,
`cutlass::Kernel2<…>` and `cutlass::device_kernel<…>`, FlashAttention 3's architecture guard,
CK-tile's `ck_tile::kentry<…>`, and cuBLAS's GEMV behind a `std::enable_if<…>::type` return
type. Each name is the kernel's own, never the wrapper's ("Kernel", "device_kernel",
"enable_if"), and CUTLASS's GEMMs are GEMMs.

Every name below is copied from a public profile (torch.profiler tables and Chrome traces,
nsys and rocprof summaries in public repositories and issues; CUTLASS issue #85 for the
basic_gemm one); `…`/`...` marks where that report cut the name short, as reports do.
"""

from __future__ import annotations

import pytest

from profiling.kernels.names import classify, decode, short_name
from profiling.kernels.roles import (
    COMBINE,
    FUSED_FORWARD,
    GEMM,
    GRADIENTS,
    PREPROCESS,
    UNKNOWN,
    Chain,
    KernelSpans,
    kernel_role,
    role_table,
    roles,
)

CUTLASS_TF32 = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4::Params)"
)
CUTLASS_F16_NSYS = (
    "void cutlass::Kernel<cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_tn_align8>"
    "(T1::Params)"
)
CUTLASS_SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)"
CUTLASS_Z884 = (
    "void cutlass::Kernel2<cutlass_80_tensorop_z884gemm_32x16_16x3_nn_align1>"
    "(cutlass_80_tensorop_z884gemm_32x16_16x3_nn_align1::Params)"
)
CUTLASS_BF16 = (
    "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_64x64_64x6_tn_align8>(T1::Params)"
)
CUTLASS_BASIC_GEMM = (  # CUTLASS issue #85: examples/00_basic_gemm under Nsight
    "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::MmaPipelined<"
    "cutlass::gemm::GemmShape<int=128,int=128,int=8>,cutlass::transform::threadblock::"
    "PredicatedTileIterator<cutlass::MatrixShape<int=128,int=8>,float,cutlass::layout::RowMajor,"
    "int=1,cutlass::transform::PitchLinearStripminedThreadMap<cutlass::layout::PitchLinearShape<"
    "int=8,int=128>,int=256,int=1>,int=1>"
)
CUTLASS3_GROUPED = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
    "GroupProblemShape<cute::tuple<long, long, long>>, cutlass::gemm::collective::CollectiveMma<"
    "cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized<(int)12, ..."
)
FA3_FORWARD = (
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
    "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<"
    "cute::C<128>, cute::C<80>, cute::C<256> >, 256, cutlass::bfloat16_t, float, cutlass::arch::"
    "Sm90, false, false, false, true, true, false, false, true, "
)
FA3_COMBINE = "void cutlass::device_kernel<flash::FlashAttnFwdCombine<cu..."
SM100_FMHA = (
    "void cutlass::device_kernel<cutlass::fmha::kernel::Sm100FmhaFwdKernelTmaWarpspecialized"
    "<cute:..."
)
GEMVX = (
    "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, "
    "__nv_bfloat16, __nv_bfloat16, float, (bool)0, (bool)1, (bool)1, (bool)0, (int)7, (bool)0, "
    "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, "
    "cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<"
    "__nv_bfloat16>, float>>(T13)"
)
GEMVX_NSYS_CUT = (
    "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, float, float, float, float, "
    "(bool…"
)
GEMM_SN = (
    "void gemmSN_TN_kernel<float, (int)128, (int)16, (int)2, (int)4, (int)4, (int)4, (bool)1, "
    "cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<const float>, …"
)
SPLIT_K = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __n"
LT_EPILOGUE = (
    "void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, true, 1>(int, "
    "int, long, float*, cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, "
    "long, int*)"
)
CK_GEMM = (
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3<"
    "ck::tensor_layout::gemm::RowMajor, ck::tensor_layout::gemm::ColumnMajor, ck::Tuple<>, "
    "ck::tensor_layout::gemm::RowMajor, ck::f8_fnuz_t, ck::f8_fnuz_t, float, float, ck::Tuple<>, "
    "unsigned short, ck::tensor_operation::element_wise::PassThrough, "
    "(ck::tensor_operation::device::GemmSpecialization)2, 256, 1, 128, 128, 16, 128, 256, "
    "ck::Sequence<16, 16, 1>, (ck::BlockGemmPipelineScheduler)0, ck::f8_fnuz_t>, true, "
    "(ck::InMemoryDataOperationEnum)0, 2, (ck::TailNumber)10>(ck::GridwiseGemmMultiD_ABScale_"
    "xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, ck::f8_fnuz_t>::Argument)"
)
CK_TILE_GROUPED = (
    "void ck_tile::kentry<1, ck_tile::GroupedGemmKernel<ck_tile::GemmSpatiallyLocalTilePartitio..."
)
CK_TILE_FMHA_FWD = "void ck_tile::kentry<256, 2, ck_tile::FmhaFwdKernel<..."
CK_TILE_FMHA_BWD = "void ck_tile::kentry<256, 1, ck_tile::FmhaBwdDQDKDVK..."
CK_TILE_DOT = "void ck_tile::kentry<64, 2, ck_tile::FmhaBwdOGradDot..."
CK_TILE_SORT = (
    "void ck_tile::kentry<2, ck_tile::MoeSortingMultiPhaseKernel_P23<ck_tile::MoeSortingProblemMp"
    "<int>>, ck_tile::MoeSortingMultiPhaseKernel_P23<ck_tile::MoeSortingProblemMp<int>>::Kargs>("
    "ck_tile::MoeSortingMultiPhaseKernel_P23<ck_tile::MoeSortingProblemMp<int"
)
TENSILE = (
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x208x64_MI16x16x1_SN_LDSB1_AFC0_AFEM1_"
    "AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB4_GSU0_GSUAMB_"
    "GLS0_ISA950_IU1_K1_LDSTI0_LBSPPA512_L"
)
UNNAMED_CAT = (
    "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType"
    "<(unsigned int)2>, unsigned int, (int)3, (int)128, (int)1, (int)16, (int)8>(char *, "
    "at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, at::native::<unnamed>::"
    "TensorSizeStride<T2, (unsigned int)4>, int, T2)"
)

GEMMS = [
    (CUTLASS_TF32, "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4"),
    (CUTLASS_F16_NSYS, "cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_tn_align8"),
    (CUTLASS_SIMT, "cutlass_80_simt_sgemm_256x128_8x4_nn_align1"),
    (CUTLASS_Z884, "cutlass_80_tensorop_z884gemm_32x16_16x3_nn_align1"),
    (CUTLASS_BF16, "cutlass_80_tensorop_s16816gemm_bf16_64x64_64x6_tn_align8"),
    (CUTLASS_BASIC_GEMM, "Gemm"),
    (CUTLASS3_GROUPED, "GemmUniversal"),
    (GEMVX, "gemvx::kernel"),
    (GEMVX_NSYS_CUT, "gemvx::kernel"),
    (GEMM_SN, "gemmSN_TN_kernel"),
    (SPLIT_K, "splitKreduce_kernel"),
    (LT_EPILOGUE, "cublasLt::epilogue::globalKernel"),
    (CK_GEMM, "kernel_gemm_xdl_cshuffle_v3"),
    (CK_TILE_GROUPED, "GroupedGemmKernel"),
    (TENSILE, TENSILE[:77] + "…"),
]


@pytest.mark.parametrize(("name", "short"), GEMMS)
def test_a_wrapped_gemm_is_named_for_itself_and_is_a_gemm(name, short):
    assert short_name(name) == short
    assert classify(name) == "gemm"
    assert kernel_role(name, Chain()) == GEMM  # an upload's kernel outside attention


@pytest.mark.parametrize(
    ("name", "short", "role"),
    [
        (FA3_FORWARD, "FlashAttnFwdSm90", FUSED_FORWARD),
        (FA3_COMBINE, "FlashAttnFwdCombine", COMBINE),
        (SM100_FMHA, "Sm100FmhaFwdKernelTmaWarpspecialized", FUSED_FORWARD),
        (CK_TILE_FMHA_FWD, "FmhaFwdKernel", FUSED_FORWARD),
        (CK_TILE_FMHA_BWD, "FmhaBwdDQDKDVK...", GRADIENTS),
        (CK_TILE_DOT, "FmhaBwdOGradDot...", PREPROCESS),
    ],
)
def test_wrapped_attention_kernels_are_attentions(name, short, role):
    assert short_name(name) == short
    assert classify(name) == "fused attention"
    assert kernel_role(name, Chain()) == role  # the name alone says attention


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (CK_TILE_SORT, "MoeSortingMultiPhaseKernel_P23"),
        (UNNAMED_CAT, "CatArrayBatchedCopy_vectorized"),  # `<unnamed>::` holds brackets too
    ],
)
def test_other_wrapped_names(name, short):
    assert short_name(name) == short


@pytest.mark.parametrize(
    ("name", "reading"),
    [
        (CUTLASS_TF32, "CUTLASS GEMM built for sm_80; on tensor cores; MMA 16×8×8 (fp32 data: "
         "TF32), fp32 accumulation; tile 64x64, K-tile 32, pipeline stages 4"),
        (CUTLASS_SIMT, "CUTLASS GEMM built for sm_80; tile 256x128, K-tile 8, pipeline stages 4; "
         "FP32 GEMM on CUDA cores: no tensor cores"),
        (CUTLASS_Z884, "CUTLASS GEMM built for sm_80; on tensor cores; MMA 8×8×4 in fp64; tile "
         "32x16, K-tile 16, pipeline stages 3"),
        (GEMVX, "cuBLAS GEMV: a matrix times a vector; bf16 data"),
        (SPLIT_K, "cuBLAS split-K: the partial GEMM sums added up; bf16 data"),
        (CUTLASS3_GROUPED, "GEMM (CUTLASS/CK template)"),
        (TENSILE, "Tensile GEMM (rocBLAS/hipBLASLt), tile 256x208x64; on matrix cores (MFMA)"),
    ],
)  # fmt: skip
def test_cutlass_and_cublas_names_say_gemm_tile_and_tensor_cores(name, reading):
    assert decode(name) == reading


def test_an_uploads_cutlass_gemms_are_not_a_kernel_without_a_role():
    """The A100 trace of issue 42: its CUTLASS GEMMs sat in "Kernel (no known role)"."""
    names = (CUTLASS_TF32, CUTLASS_SIMT, GEMVX, "void my_custom_kernel<256>(float*)")
    found = roles(list(names), [Chain()] * len(names))
    table = role_table(KernelSpans(names, (30.0, 20.0, 10.0, 5.0), tuple(found)))
    assert table["role"].tolist() == [GEMM, f"my_custom_kernel{UNKNOWN}"]
    assert table["us"].tolist() == [60.0, 5.0]
    assert table["kernels"][0] == (
        "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4, "
        "cutlass_80_simt_sgemm_256x128_8x4_nn_align1, gemvx::kernel"
    )
