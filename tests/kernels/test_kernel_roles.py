"""Kernels by their role in attention (issue 22, point 3): read from the operator that
launched each kernel, pinned on every H200 fixture (forward, training, decode, and a user's
trace recorded with shapes) and on the rules' order."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pytest

from profiling.analysis.summary import work_rows
from profiling.kernels import chains as kernel_chains
from profiling.kernels import roles as kernel_roles
from profiling.kernels.roles import Chain, roles
from profiling.run import records as small_trace
from profiling.trace import model as trace

FIXTURES = Path(__file__).parents[1] / "fixtures"
# every kernel each fixture launched, counted by role ("" is a kernel no rule knows)
EXPECTED = {
    # timing modes (issue 23): the cold-l2 flush between steps is not attention's; a CUDA
    # graph's replayed kernels keep the roles their names give (no operator inside a replay)
    "h200_cold-l2_sdpa-cudnn_8_16_1024_64_bf16": {
        "fused attention forward": 10,
        "workspace": 10,
        "L2 flush (cold-l2 timing, not attention)": 10,
    },
    "h200_cuda-graph_sdpa-cudnn_8_16_1024_64_bf16": {
        "fused attention forward": 10,
        "workspace": 10,
    },
    "h200_eager10_sdpa-cudnn_8_16_1024_64_bf16": {"fused attention forward": 10, "workspace": 10},
    "h200_compiled-naive_8_16_1024_64_bf16": {"PV": 3, "QKᵀ": 3, "softmax": 3, "workspace": 3},
    # its pointwise helper after the template kernel has no role: left under its name
    "h200_decode-flex_16_32_8192_128_bf16": {"": 3, "fused attention forward": 3},
    "h200_decode-kernels-local-triton_16_32_8192_128_bf16": {
        "fused attention forward": 3,
        "split-KV combine": 3,
        "workspace": 3,
    },
    "h200_decode-naive_16_32_8192_128_bf16": {
        "PV": 3,
        "QKᵀ": 3,
        "copy": 9,
        "mask": 3,
        "scale": 3,
        "softmax": 3,
        "workspace": 6,
    },
    "h200_decode-sdpa-auto_16_32_8192_128_bf16": {
        "fused attention forward": 3,
        "split-KV combine": 3,
    },
    "h200_decode-sdpa-cudnn_16_32_8192_128_bf16": {"fused attention forward": 3, "mask": 15},
    "h200_flex_8_16_1024_64_bf16": {"fused attention forward": 3},
    "h200_kernels-local-triton_8_16_1024_64_bf16": {"fused attention forward": 3},
    "h200_naive-inplace_8_16_1024_64_bf16": {
        "PV": 3,
        "QKᵀ": 3,
        "mask": 3,
        "scale": 3,
        "softmax": 3,
        "workspace": 3,
    },
    "h200_sdpa-efficient_8_16_1024_64_bf16": {"fused attention forward": 3},
    "h200_sdpa-math_8_16_1024_64_bf16": {
        "PV": 3,
        "QKᵀ": 3,
        "cast/upcast": 15,
        "mask": 18,
        "scale": 6,
        "softmax": 15,
    },
    "h200_train-compiled-naive_8_16_1024_64_bf16": {
        "PV": 3,
        "QKᵀ": 3,
        "copy": 3,
        "dQ/dK/dV": 12,
        "softmax": 6,
        "workspace": 6,
    },
    "h200_train-flex_8_16_1024_64_bf16": {
        "backward pre-processing": 3,
        "dQ/dK/dV": 3,
        "fused attention forward": 3,
    },
    "h200_train-kernels-local-triton_8_16_1024_64_bf16": {
        "backward pre-processing": 3,
        "dQ/dK/dV": 6,
        "fused attention forward": 3,
    },
    "h200_train-naive_8_16_1024_64_bf16": {
        "PV": 3,
        "QKᵀ": 3,
        "copy": 9,
        "dQ/dK/dV": 12,
        "mask": 6,
        "scale": 6,
        "softmax": 9,
        "workspace": 6,
    },
    "h200_train-sdpa-cudnn_8_16_1024_64_bf16": {
        "backward pre-processing": 3,
        "dQ/dK/dV": 6,
        "fused attention forward": 3,
        "workspace": 6,
    },
    "h200_train-sdpa-efficient_8_16_1024_64_bf16": {
        "copy": 12,
        "dQ/dK/dV": 3,
        "fused attention forward": 3,
        "workspace": 3,
    },
    "h200_train-sdpa-flash_8_16_1024_64_bf16": {
        "backward pre-processing": 3,
        "copy": 6,
        "dQ/dK/dV": 6,
        "fused attention forward": 3,
    },
    "h200_train-sdpa-math_8_16_1024_64_bf16": {
        "PV": 3,
        "QKᵀ": 3,
        "cast/upcast": 27,
        "copy": 3,
        "dQ/dK/dV": 12,
        "mask": 18,
        "scale": 12,
        "softmax": 21,
    },
    # a user's naive attention with no attention op above any launch (issue 31): named plainly
    "h200_user-naive_8_16_1024_64_bf16": {
        "GEMM": 4,
        "copy": 2,
        "elementwise": 6,
        "softmax": 2,
        "memset": 2,
    },
    "h200_user-sdpa_8_16_1024_64_bf16": {"fused attention forward": 2, "workspace": 2},
    "naive_8_16_1024_64_bf16": {
        "PV": 3,
        "QKᵀ": 3,
        "copy": 3,
        "mask": 3,
        "scale": 3,
        "softmax": 3,
        "workspace": 3,
    },
    "sdpa_cudnn_8_16_1024_64_bf16": {"fused attention forward": 3, "workspace": 3},
    "sdpa_flash_8_16_1024_64_bf16": {"fused attention forward": 3},
}


def table_roles(path: Path) -> list[str]:
    spans = trace.load(path).spans
    rows = work_rows(spans)
    rows = rows[spans["link"].to_numpy()[rows] >= 0]
    names = [str(name) for name in spans["name"].to_numpy()[rows]]
    in_run = kernel_roles.attention_run(spans["name"].astype(str).unique())
    return roles(names, kernel_roles.table_chains(spans, rows), in_run=in_run)


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_every_kernel_of_every_h200_fixture_has_its_role(fixture):
    path = FIXTURES / f"{fixture}.json.gz"
    found = table_roles(path)
    assert dict(collections.Counter(found)) == EXPECTED[fixture]
    records = small_trace.read(path)
    if records is not None:  # a run's own trace: the records reader tags the same roles
        work = [span for span in records.spans if span.gpu and not span.ann and span.link >= 0]
        chains = kernel_roles.record_chains(records.spans, work)
        assert roles([span.name for span in work], chains, in_run=True) == found


def test_the_fixtures_cover_every_role_but_the_unknown_matmul():
    seen = {role for counts in EXPECTED.values() for role in counts}
    plain = set(kernel_roles.PLAIN_ROLES) - {kernel_roles.REDUCTION, kernel_roles.COLLECTIVE}
    assert seen == set(kernel_roles.ROLES) - {kernel_roles.MATMUL} | {""} | plain
    assert set(EXPECTED) == {p.name[:-8] for p in FIXTURES.glob("*.json.gz")}


def chain(*names: str, dims=None) -> Chain:
    return Chain(names, tuple(range(len(names))), dims or (None,) * len(names))


@pytest.mark.parametrize(
    ("name", "ops", "role"),
    [
        # the most specific op decides: softmax's guard, not the mask
        ("elementwise_kernel<where>", ("aten::where", "aten::_safe_softmax"), "softmax"),
        ("elementwise_kernel<where>", ("aten::where", "aten::scaled_dot_product_attention"),
         "mask"),
        ("vectorized_elementwise_kernel<mul>", ("aten::mul", "attn_fwd"), "scale"),
        ("direct_copy_kernel", ("aten::copy_", "aten::_to_copy", "aten::to"), "cast/upcast"),
        ("direct_copy_kernel", ("aten::copy_", "aten::clone", "aten::contiguous"), "copy"),
        ("FillFunctor", ("aten::fill_", "aten::ones"), "mask"),
        ("FillFunctor", ("aten::fill_", "aten::zero_"), "workspace"),
        ("elementwise_kernel<add>", ("aten::add_", "aten::_scaled_dot_product_attention_math"),
         "mask"),
        ("elementwise_kernel<add>", ("aten::add_", "attn_fwd"), ""),
        # projections are not attention's matmuls; a backward's matmuls are gradient work
        ("nvjet_gemm", ("aten::addmm", "aten::linear"), ""),
        ("nvjet_gemm", ("aten::bmm", "BmmBackward0",
                        "autograd::engine::evaluate_function: BmmBackward0"), "dQ/dK/dV"),
        # the name is the role, whoever launched it
        ("Memcpy DtoD (Device -> Device)", ("aten::copy_", "aten::clone", "aten::masked_fill"),
         "copy"),
        ("Memset (Device)", ("aten::bmm",), "workspace"),
        ("flash_fwd_splitkv_combine_kernel", ("aten::_flash_attention_forward",),
         "split-KV combine"),
        ("flash_bwd_dot_do_o_kernel", (), "backward pre-processing"),
        # our backward's kernels: delta, then the pointer, TMA and warp-specialised Gluon
        # dK/dV passes and dQ (attention/flash_triton)
        ("_flash_bwd_preprocess", (), "backward pre-processing"),
        ("_flash_bwd_dkdv", (), "dQ/dK/dV"),
        ("_flash_bwd_dkdv_tma", (), "dQ/dK/dV"),
        ("_flash_bwd_dkdv_ws_kernel", (), "dQ/dK/dV"),
        ("_flash_bwd_dq", (), "dQ/dK/dV"),
        ("triton_per_fused__softmax_masked_fill_mul_0", ("## Call CompiledFxGraph x ##",),
         "softmax"),
        ("triton_poi_fused__to_copy_1", (), "cast/upcast"),
        ("some_kernel_nobody_knows", ("aten::sort",), ""),
    ],
)  # fmt: skip
def test_role_rules(name, ops, role):
    """The rules inside an attention run (this app's: every kernel is attention's)."""
    assert roles([name], [chain(*ops)], in_run=True) == [role]


def test_qk_and_pv_by_order_only_when_one_parent_holds_exactly_two_matmuls():
    two = [Chain(("aten::bmm", "aten::matmul", "attn_fwd"), (5 + i, 4 + i, 1), (None,) * 3)
           for i in (0, 10)]  # fmt: skip
    assert roles(["gemm_a", "gemm_b"], two, in_run=True) == ["QKᵀ", "PV"]
    three = [*two, Chain(("aten::bmm", "aten::matmul", "attn_fwd"), (30, 29, 1), (None,) * 3)]
    assert roles(["gemm_a", "gemm_b", "gemm_c"], three, in_run=True) == ["matmul"] * 3


def test_recorded_shapes_tell_qk_from_pv_whatever_the_order():
    pv = [[128, 1024, 1024], [128, 1024, 64]]  # P @ V: contracts over the 1024 keys
    qk = [[128, 1024, 64], [128, 64, 1024]]  # Q @ Kᵀ: contracts over the head dim
    chains = [chain("aten::bmm", dims=(pv,)), chain("aten::bmm", dims=(qk,))]
    assert roles(["gemm", "gemm"], chains, in_run=True) == ["PV", "QKᵀ"]


def test_the_users_trace_with_recorded_shapes_keeps_the_matmul_dims():
    spans = trace.load(FIXTURES / "h200_user-naive_8_16_1024_64_bf16.json.gz").spans
    rows = work_rows(spans)
    rows = rows[spans["link"].to_numpy()[rows] >= 0]
    chains = kernel_roles.table_chains(spans, rows)
    shaped = [c for c in chains if c.names[:1] == ("aten::bmm",)]
    assert shaped[0].dims[0] == [[128, 1024, 64], [128, 64, 1024]]
    assert np.all([c.ids[0] != c.ids[1] for c in shaped])


def _per_kernel(spans, rows):
    """kernel_roles' rules one kernel at a time: the oracle of profiling.kernels.chains."""
    names = [str(name) for name in spans["name"].to_numpy()[rows]]
    chains = kernel_roles.table_chains(spans, rows)
    in_run = kernel_roles.attention_run(spans["name"].astype(str).unique())
    return roles(names, chains, in_run=in_run), chains


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_roles_by_signature_equal_the_rules_kernel_by_kernel(fixture):
    spans = trace.load(FIXTURES / f"{fixture}.json.gz").spans
    rows = np.flatnonzero(spans["category"].to_numpy() == "kernel")
    expected, chains = _per_kernel(spans, rows)
    found = kernel_chains.TableKernels(spans, rows)
    assert list(found.roles) == expected
    assert list(found.chains()) == chains


def _attention_steps(steps: int, matmuls: tuple[int, ...]) -> bytes:
    """A trace of `steps` ProfilerSteps; in each, one parent op per entry of `matmuls` holding
    that many aten::bmm calls, each launching a gemm kernel (no recorded shapes)."""
    events, time, correlation = [], 0.0, 0

    def span(name, cat, start, dur, tid=1, pid=1, **args):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                       "ts": start, "dur": dur, "args": args})  # fmt: skip

    for step in range(steps):
        span(f"ProfilerStep#{step}", "user_annotation", time, 1000.0)
        for count in matmuls:
            span("aten::_scaled_dot_product_attention_math", "cpu_op", time + 1, 40.0 * count)
            for _ in range(count):
                correlation += 1
                span("aten::bmm", "cpu_op", time + 2, 30.0)
                span("cudaLaunchKernel", "cuda_runtime", time + 3, 5.0, correlation=correlation)
                span("gemm_kernel", "kernel", time + 10, 20.0, tid=7, pid=0,
                     correlation=correlation)  # fmt: skip
                time += 35.0
            time += 50.0 * count
        time += 1000.0
    return json.dumps({"traceEvents": events}).encode()


def test_signatures_keep_matmuls_of_other_steps_apart():
    """Every step repeats the same ops: a few signatures for all kernels, yet QKᵀ/PV by call
    order stays per parent op (two calls under one parent: QKᵀ then PV; three: matmul)."""
    spans = trace.load(_attention_steps(4, (2, 3))).spans
    rows = np.flatnonzero(spans["category"].to_numpy() == "kernel")
    expected, chains = _per_kernel(spans, rows)
    found = kernel_chains.TableKernels(spans, rows)
    assert list(found.roles) == expected == ["QKᵀ", "PV", "matmul", "matmul", "matmul"] * 4
    assert list(found.chains()) == chains
    assert len(set(found.signature.tolist())) == 1


def test_signatures_of_a_generated_trace_are_few_and_roofline_keys_finer(tmp_path):
    from benchmarks.gen_trace_stream import write

    spans = trace.load(write(30_000, tmp_path / "t.json")).spans
    rows = np.flatnonzero(spans["category"].to_numpy() == "kernel")
    expected, chains = _per_kernel(spans, rows)
    found = kernel_chains.TableKernels(spans, rows)
    assert list(found.roles) == expected
    assert list(found.chains()[:50]) == chains[:50]
    assert len(set(found.signature.tolist())) < len(rows) / 50
    pairs = set(zip(found.key.tolist(), found.signature.tolist(), strict=True))
    assert len({key for key, _ in pairs}) == len(pairs)  # a key never spans two signatures


def factorised_before(columns, count):
    """chains._factorised before issue 42 (one hash pass per column), verbatim: the oracle."""
    import pandas as pd

    code = np.zeros(count, dtype=np.int64)
    for column in columns:
        column = np.asarray(column, dtype=np.int64)
        span = int(column.max()) + 2 if count else 1
        code, _ = pd.factorize(code * span + column + 1)
        code = code.astype(np.int64)
    _, first = np.unique(code, return_index=True)
    return code, first


@pytest.mark.parametrize("packed", [kernel_chains._PACKED, 50])  # 50: renumbered often
@pytest.mark.parametrize("seed", range(20))
def test_signature_codes_are_those_of_one_hash_pass_per_column(seed, packed, monkeypatch):
    """chains._factorised packs the columns into one key: the codes (first appearance of
    each combination) and first rows are those of a hash pass per column, with -1s, wide
    ranges (past a packed key's room) and no rows."""
    monkeypatch.setattr(kernel_chains, "_PACKED", packed)
    rng = np.random.default_rng(seed)
    count = int(rng.integers(0, 300))
    columns = [
        rng.integers(-1, int(rng.choice([2, 5, 10**6, 2**40])), count)
        for _ in range(int(rng.integers(1, 14)))
    ]
    code, first = kernel_chains._factorised(columns, count)
    want_code, want_first = factorised_before(columns, count)
    assert code.dtype == want_code.dtype and np.array_equal(code, want_code)
    assert np.array_equal(first, want_first)


def test_signature_codes_stay_apart_where_packed_keys_would_wrap():
    """Three columns of range 2³²: packed without renumbering, the first column would be
    shifted past 64 bits and two signatures that differ only there would be one."""
    wide = 2**32 - 2
    columns = [np.array([0, 1]), np.array([wide, wide]), np.array([wide, wide])]
    code, first = kernel_chains._factorised(columns, 2)
    assert code.tolist() == [0, 1] and first.tolist() == [0, 1]


def bytes_codes_before(values):
    """chains._bytes_codes' codes for ints and None before issue 42, verbatim: the oracle."""
    import pandas as pd

    codes, _ = pd.factorize(np.array(values, dtype=object), use_na_sentinel=True)
    return np.where(codes >= 0, codes + 1, 0).astype(np.int64)


@pytest.mark.parametrize("seed", range(10))
def test_a_kernels_bytes_are_coded_as_pandas_coded_them(seed):
    """chains._bytes_codes numbers each distinct `bytes` 1, 2, ... in order of first
    appearance and None 0, by a dict now: the same codes, for 0, negatives and ints past
    int64, in EventArgs and in dicts."""
    from profiling.trace.events import EventArgs

    rng = np.random.default_rng(seed)
    pool = [None, 0, 1, -4, 4096, 2**70, 7]
    values = [pool[i] for i in rng.integers(0, len(pool), int(rng.integers(0, 200)))]
    args = np.empty(len(values), dtype=object)
    args[:] = [EventArgs(bytes=v) for v in values]
    rows = np.arange(len(values))
    want = bytes_codes_before(values)
    got = kernel_chains._bytes_codes(args, rows)
    assert got.dtype == want.dtype and np.array_equal(got, want)
