"""Roles where the evidence is (issue 31, points 7 and 8), on traces generated to the shape of
real ones (tests/fixtures/generated/generate.py):

- a CUDA graph's replayed kernels have no operator above them: inside attention their names
  decide (naive's graph run has the eager run's roles) and SDPA's backend is read off its
  kernels (`flash_fwd_kernel` is flash);
- a recommendation model's trace has no attention: its kernels are named plainly (GEMM,
  elementwise, collective, copy, memset) or left without a role, one role per kernel name.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

from attention.registry import VARIANTS
from profiling.analysis import summary
from profiling.analysis.role_views import trace_roles
from profiling.analysis.summary import work_rows
from profiling.kernels import roles as kernel_roles
from profiling.kernels.chains import TableKernels
from profiling.run import records as small_trace
from profiling.run import trace as run_trace
from profiling.trace import model as trace

FIXTURES = Path(__file__).parents[1] / "fixtures"
GENERATED = FIXTURES / "generated"
SHAPE = "8_16_1024_64_bf16"
GRAPH_NAIVE = GENERATED / f"graph-naive_{SHAPE}.json.gz"
GRAPH_FLASH = GENERATED / f"graph-sdpa-flash_{SHAPE}.json.gz"
RECSYS = GENERATED / "recsys_v100_3steps.json.gz"
ATTENTION_ONLY = set(kernel_roles.ROLES) - {kernel_roles.COPY, kernel_roles.SOFTMAX}


def _roles_by_step(table) -> dict[str, float]:
    return dict(zip(table["role"], table["calls"], strict=True))


@pytest.mark.parametrize("reader", [run_trace.of_table, run_trace.of_records])
def test_a_graph_replay_of_naive_has_the_eager_runs_roles(reader):
    eager = run_trace.read(FIXTURES / f"naive_{SHAPE}.json.gz")
    source = (
        trace.load(GRAPH_NAIVE) if reader is run_trace.of_table else small_trace.read(GRAPH_NAIVE)
    )
    assert source is not None
    graph = reader(source)
    assert _roles_by_step(graph.roles()) == _roles_by_step(eager.roles())
    assert not any(graph.roles()["role"].str.endswith(kernel_roles.UNKNOWN))
    kernels = graph.kernels.set_index("kernel")
    assert kernels.loc["softmax_warp_forward", "role"] == "softmax"
    assert kernels.loc["elementwise_kernel (masked_fill)", "role"] == "mask"


def test_a_graph_replay_names_sdpa_flash_by_its_kernel():
    for read in (run_trace.read, lambda path: run_trace.of_table(trace.load(path))):
        found = read(GRAPH_FLASH)
        assert found.stats.backend == "flash"
        assert VARIANTS["sdpa-flash"].ran(None, found.stats.backend) == "SDPA flash"
        assert found.roles()["role"].tolist() == ["fused attention forward"]
    assert summary.sdpa_backend(trace.load(GRAPH_FLASH)) is None  # no aten op: kernels tell
    assert run_trace.read(GRAPH_NAIVE).stats.backend is None  # naive's kernels are no SDPA's


def test_a_pinned_sdpa_variant_says_its_pin_when_the_trace_names_no_backend():
    assert VARIANTS["sdpa-math"].ran(None, None) == "SDPA math (pinned: the trace names no backend)"
    assert VARIANTS["sdpa-auto"].ran(None, None) == "SDPA (backend not visible in trace)"
    assert VARIANTS["sdpa-math"].ran(None, "math") == "SDPA math"


def test_a_recommendation_models_kernels_are_named_plainly():
    spans = trace.load(RECSYS).spans
    rows = work_rows(spans)
    kernels = TableKernels(spans, rows)
    by_name = collections.defaultdict(set)
    for name, role in zip(kernels.names, kernels.roles, strict=True):
        by_name[kernel_roles.short_name(name)].add(role)
    assert {name: roles.pop() for name, roles in by_name.items() if len(roles) == 1} == {
        "Memcpy HtoD": "copy",
        "permute_2D_data_kernel": "",
        "split_embedding_codegen_forward_unweighted_kernel": "",
        "volta_sgemm_128x64_nn": "GEMM",  # linear layers and the feature interaction's bmm
        "vectorized_elementwise_kernel (mul)": "elementwise",
        "elementwise_kernel (where)": "elementwise",
        "Memset": "memset",
        "volta_sgemm_64x64_nt": "GEMM",  # a BmmBackward0's, not dQ/dK/dV
        "split_embedding_backward_codegen_sgd_unweighted_kernel_cta_per_row_1": "",
        "ncclKernel_AllReduce_RING_LL_Sum_float": "collective",  # under AccumulateGrad: no copy
    }
    assert not ATTENTION_ONLY & set(kernels.roles)
    # the rules kernel by kernel agree with the table's signatures
    chains = kernel_roles.table_chains(spans, rows)
    assert kernel_roles.roles(kernels.names, chains) == list(kernels.roles)


def test_an_attention_op_above_the_launch_is_the_evidence():
    mul = "vectorized_elementwise_kernel<MulFunctor>"
    plain = kernel_roles.Chain(("aten::mul", "ProfilerStep#1"), (2, 1), (None, None))
    inside = kernel_roles.Chain(
        ("aten::mul", "nn.Module: CausalSelfAttention_0"), (2, 1), (None, None)
    )
    assert kernel_roles.roles([mul, mul], [plain, inside]) == ["elementwise", "scale"]
    assert kernel_roles.roles([mul], [plain], in_run=True) == ["scale"]  # this app's run


def test_an_uploads_role_table_keeps_to_plain_roles():
    table, steps = trace_roles(trace.load(RECSYS))
    assert steps == 3
    assert set(table["role"]) >= {"GEMM", "elementwise", "collective", "copy", "memset"}
    unknown = table[table["role"].str.endswith(kernel_roles.UNKNOWN)]
    assert len(unknown) == 3 and np.all(unknown["calls"] == 1)  # the fbgemm kernels, once a step


def test_a_replayed_backward_gemm_is_gradient_work():
    """A train run's backward graph is replayed under attn_bwd: no autograd op says so."""
    gemm = "nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NTT"
    replayed = kernel_roles.Chain(
        ("attn_bwd", "attn_step", "ProfilerStep#2"), (3, 2, 1), (None,) * 3
    )
    forward = kernel_roles.Chain(
        ("attn_fwd", "attn_step", "ProfilerStep#2"), (4, 2, 1), (None,) * 3
    )
    assert kernel_roles.roles([gemm], [replayed], in_run=True) == ["dQ/dK/dV"]
    assert kernel_roles.roles([gemm], [forward], in_run=True) == ["matmul"]  # one call: no split
