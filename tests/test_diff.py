"""Diff: per-kernel and per-operator deltas, on H200 fixtures and on two CPU runs."""

from __future__ import annotations

import pytest

from profiling import trace
from profiling.diff import KERNEL_DIFF_COLUMNS, OPERATOR_DIFF_COLUMNS, diff, labelled
from profiling.runner import run
from profiling.summary import per_forward
from profiling.workload import Workload
from tests.conftest import CUDNN, FIXTURES, FLASH, NAIVE


def test_naive_vs_flash_per_forward():
    kernels, operators = diff(NAIVE, FLASH, "naive", "flash")
    assert list(kernels.columns) == KERNEL_DIFF_COLUMNS
    assert list(operators.columns) == OPERATOR_DIFF_COLUMNS
    k = kernels.set_index("kernel")
    memcpy = k.loc["Memcpy DtoD"]
    assert (memcpy["count_a"], memcpy["count_b"], memcpy["where"]) == (1, 0, "a")
    assert memcpy["delta_count"] == -1 and memcpy["delta_us"] == pytest.approx(-126.47, abs=0.01)
    flash = k.loc["flash_fwd_kernel"]
    assert (flash["count_a"], flash["count_b"], flash["where"]) == (0, 1, "b")
    assert kernels["count_a"].sum() == 7 and kernels["count_b"].sum() == 1  # 5+memcpy+memset
    assert len(kernels) == 8  # one row per kernel that ran: none for the trace's other names
    assert kernels["delta_us"].sum() == pytest.approx(95.54 - 1065.05, abs=0.02)
    deltas = kernels["delta_us"].abs().tolist()
    assert deltas == sorted(deltas, reverse=True)
    ops = operators.set_index("operator")
    assert ops.loc["aten::_scaled_dot_product_flash_attention", "where"] == "b"
    assert ops.loc["aten::bmm", "count_a"] == 2 and ops.loc["aten::bmm", "where"] == "a"
    assert kernels.attrs["divisors"] == (3, 3)
    assert kernels.attrs["per_forward"] is True
    assert kernels.attrs["units"] == ("per forward", "per forward")


def test_memset_in_both_and_totals_mode():
    kernels, _ = diff(NAIVE, CUDNN, per_forward=False)
    memset = kernels.set_index("kernel").loc["Memset"]
    assert (memset["count_a"], memset["count_b"], memset["where"]) == (3, 3, "both")
    assert memset["delta_us"] == pytest.approx(3 * (0.768 - 0.864), abs=1e-6)
    assert kernels.attrs["divisors"] == (1, 1)
    assert kernels.attrs["per_forward"] is False
    assert kernels.attrs["units"] == ("in total", "in total")  # not "per forward"


def test_a_trace_against_itself_has_no_delta():
    tr = trace.load(CUDNN)
    kernels, operators = diff(tr, CUDNN.read_bytes())  # a Trace and raw gzip bytes
    assert (kernels["delta_us"] == 0).all() and (operators["delta_us"] == 0).all()
    assert (kernels["where"] == "both").all()


def test_labelled_names_the_columns_after_the_runs():
    kernels, operators = diff(NAIVE, FLASH, "naive", "flash")
    shown = labelled(kernels)
    assert {"count naive", "count flash", "Δ total µs (flash − naive)"} <= set(shown.columns)
    assert shown.set_index("kernel").loc["Memcpy DtoD", "where"] == "only naive"
    assert "Δ self µs (flash − naive)" in labelled(operators).columns


def test_labelled_renames_every_measure_and_every_where():
    kernels, operators = diff(NAIVE, FLASH)  # no labels given: the runs are A and B
    assert operators.attrs["labels"] == ("A", "B")
    shown = labelled(operators)
    assert list(shown.columns) == [
        "operator", "where", "count A", "count B", "Δ count (B − A)", "total µs A",
        "total µs B", "Δ total µs (B − A)", "self µs A", "self µs B", "Δ self µs (B − A)",
    ]  # fmt: skip
    where = shown.set_index("operator")["where"]
    assert where["aten::bmm"] == "only A"  # naive's matmuls
    assert where["aten::_scaled_dot_product_flash_attention"] == "only B"
    assert where["aten::transpose"] == "both"
    # labels given to labelled() win over the table's own
    renamed = labelled(kernels, "old", "new")
    assert {"count old", "total µs new", "Δ count (new − old)"} <= set(renamed.columns)
    # a table that lost its attrs (read back from a CSV) still gets names: A and B
    bare = kernels.copy()
    bare.attrs = {}
    assert {"count A", "count B", "Δ total µs (B − A)"} <= set(labelled(bare).columns)


@pytest.fixture(scope="module")
def cpu_pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("diff")
    shape = {"seq_len": 128, "batch": 1, "heads": 2, "head_dim": 32, "dtype": "float32"}
    a = run(Workload.from_user(variant="naive", device="cpu", **shape), out_dir=out / "a")
    b = run(Workload.from_user(variant="naive-inplace", device="cpu", **shape), out_dir=out / "b")
    return a.trace_gz, b.trace_gz


def test_cpu_naive_vs_inplace_operators(cpu_pair):
    """Out-of-place masked_fill is clone + masked_fill_; in-place calls masked_fill_ directly."""
    kernels, operators = diff(*cpu_pair, "naive", "naive-inplace")
    assert kernels.empty  # no GPU on either side
    ops = operators.set_index("operator")
    for name in ("aten::clone", "aten::masked_fill"):
        assert ops.loc[name, "where"] == "a"
        assert (ops.loc[name, "count_a"], ops.loc[name, "count_b"]) == (1, 0)
    fill = ops.loc["aten::masked_fill_"]
    assert fill["where"] == "both" and (fill["count_a"], fill["count_b"]) == (1, 1)
    assert operators.attrs["scopes"] == ("3 attn_fwd spans", "3 attn_fwd spans")


def test_h200_inplace_removes_exactly_the_memcpy():
    """The post's one-character lesson, read off the diff of two real H200 traces."""
    inplace = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"
    kernels, _ = diff(NAIVE, inplace, "naive", "in-place")
    k = kernels.set_index("kernel")
    assert k.iloc[0].name == "Memcpy DtoD"  # the largest |Δ| by far
    assert (k.loc["Memcpy DtoD", "count_a"], k.loc["Memcpy DtoD", "count_b"]) == (1, 0)
    rest = kernels[kernels["kernel"] != "Memcpy DtoD"]
    assert (rest["where"] == "both").all() and (rest["delta_count"] == 0).all()


def test_h200_math_kernel_delta_matches_the_per_forward_counts():
    math = FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
    kernels, _ = diff(NAIVE, math)
    added = kernels[~kernels["category"].isin(["memcpy", "memset"])]
    a, b = per_forward(trace.load(NAIVE)), per_forward(trace.load(math))
    assert added["delta_count"].sum() == b.kernels - a.kernels > 10  # math: many more kernels
    assert kernels.set_index("kernel").loc["triu_tril_kernel", "where"] == "b"  # mask rebuilt


def test_a_step_counts_every_thread_a_forward_only_its_own():
    """A ProfilerStep holds what all threads did meanwhile (backward on autograd's thread,
    DataLoader workers); an attn_fwd span only what its own thread did."""
    from tests.conftest import from_document

    def X(name, ts, dur, cat="cpu_op", tid=1, pid=1, **args):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": pid,
                "tid": tid, "args": args}  # fmt: skip

    events = [
        X("ProfilerStep#1", 0, 100, cat="user_annotation"),
        X("ProfilerStep#2", 100, 100, cat="user_annotation"),
        X("aten::mm", 10, 5),  # the step's own thread
        X("aten::mm", 20, 5, tid=2),  # a worker thread, inside step 1
        X("aten::mm", 120, 5, tid=2),  # inside step 2
        X("aten::mm", 250, 5, tid=2),  # after the steps: not counted
        X("cudaLaunchKernel", 30, 2, cat="cuda_runtime", tid=2, correlation=7),
        X("gemm", 40, 10, cat="kernel", pid=0, tid=7, correlation=7),
    ]
    stepped = from_document({"traceEvents": events})
    kernels, operators = diff(stepped, stepped)
    mm = operators.set_index("operator").loc["aten::mm"]
    assert mm["count_a"] == 1.5  # 3 over 2 steps
    assert mm["total_us_a"] == mm["self_us_a"] == 7.5  # 3 × 5 µs over 2 steps
    gemm = kernels.set_index("kernel").loc["gemm"]
    assert (gemm["count_a"], gemm["total_us_a"]) == (0.5, 5.0)  # launched on thread 2
    forwards = [X("attn_fwd", 0, 100, cat="user_annotation"), *events[2:]]
    _, operators = diff(from_document({"traceEvents": forwards}), stepped)
    assert operators.set_index("operator").loc["aten::mm", "count_a"] == 1.0  # its thread only


def _cpu_trace(steps: bool, mm_us: float, fills: int):
    from tests.conftest import from_document

    def X(name, ts, dur, cat="cpu_op"):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": 1, "tid": 1}

    window = ("ProfilerStep#1", "user_annotation") if steps else ("attn_fwd", "user_annotation")
    events = [X(window[0], 0, 2_000, cat=window[1]), X("aten::mm", 10, mm_us)]
    events += [X("aten::fill_", 1_000 + 10 * i, 2) for i in range(fills)]
    return from_document({"traceEvents": events})


def test_headline_unit_scopes_and_the_largest_change_in_time():
    from profiling import views_diff

    a, b = _cpu_trace(True, 10.0, 1), _cpu_trace(True, 500.0, 4)
    kernels, operators = diff(a, b, "small", "big")
    headline = views_diff.diff_headline(kernels, operators)
    # the count change is named, and so is the far larger change in time
    assert headline.startswith("big has 3 more aten::fill_ per step (self +6.0 µs)")
    assert "self 12.0 → 508.0 µs" in headline
    assert headline.endswith("The largest change in self time: aten::mm (+490.0 µs).")
    assert "⚠" not in views_diff.diff_scopes(kernels)
    # different windows on the two sides are said, not silently divided differently
    kernels, operators = diff(_cpu_trace(False, 10.0, 1), b, "fwd", "step")
    assert "per window" in views_diff.diff_headline(kernels, operators)
    scopes = views_diff.diff_scopes(kernels)
    assert "fwd, 1 attn_fwd spans; step, 1 ProfilerSteps" in scopes and "⚠" in scopes


def test_markdown_in_names_and_labels_stays_text_in_the_headline():
    """A name like `*mm*` or `[l](http://e)` from an uploaded trace, or a label `_old_`, must
    not become italics or a link chosen by whoever made the trace."""
    from profiling import views_diff

    a = _cpu_trace(True, 10.0, 1)
    b = _cpu_trace(True, 10.0, 2)
    b.spans["name"] = b.spans["name"].cat.rename_categories(
        lambda n: "aten::*fill* [l](http://e)" if n == "aten::fill_" else n
    )
    page = views_diff.diff_page(a, b, "_old_", "new")
    assert r"aten::\*fill\* \[l\](http://e)" in page.headline
    assert r"\_old\_" in page.headline


def test_a_trace_without_windows_is_counted_whole():
    """No attn_fwd or ProfilerStep span: every kernel and operator counts, divided by one."""
    from tests.conftest import from_document

    def event(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": pid,
                "tid": tid, "args": args}  # fmt: skip

    events = [event("aten::mm", 10 + 20 * i, 5) for i in range(2)]
    events += [
        event("cudaLaunchKernel", 11 + 20 * i, 2, cat="cuda_runtime", correlation=i)
        for i in range(2)
    ]
    events += [
        event("gemm", 100 + 20 * i, 10, cat="kernel", pid=0, tid=7, correlation=i) for i in range(2)
    ]
    bare = from_document({"traceEvents": events})
    kernels, operators = diff(bare, bare)
    gemm = kernels.set_index("kernel").loc["gemm"]
    assert (gemm["count_a"], gemm["total_us_a"], gemm["where"]) == (2, 20, "both")
    mm = operators.set_index("operator").loc["aten::mm"]
    assert (mm["count_a"], mm["total_us_a"]) == (2, 10)
    assert kernels.attrs["divisors"] == (1, 1)
    assert kernels.attrs["units"] == ("in the whole trace", "in the whole trace")
    whole = "the whole trace (no attn_fwd or ProfilerStep spans)"
    assert operators.attrs["scopes"] == (whole, whole)


def test_equal_changes_keep_name_order():
    """Rows with the same |Δ| stay in name order (a stable sort over the name-ordered join), so
    the same two traces always list their rows the same way; an unstable sort reorders ties."""
    from tests.conftest import from_document

    def ops(calls):  # one window, then each operator `calls(i)` times, 1 µs each
        events = [{"ph": "X", "name": "attn_fwd", "ts": 0, "dur": 1_000,
                   "cat": "user_annotation", "pid": 1, "tid": 1}]  # fmt: skip
        for i in range(12):
            events += [{"ph": "X", "name": f"aten::op{i:02}", "ts": 10 * (i * 3 + k), "dur": 1,
                        "cat": "cpu_op", "pid": 1, "tid": 1} for k in range(calls(i))]  # fmt: skip
        return from_document({"traceEvents": events})

    _, operators = diff(ops(lambda i: 1), ops(lambda i: 1 + i % 2))  # odd ones gain a call
    odd = [f"aten::op{i:02}" for i in range(1, 12, 2)]
    even = [f"aten::op{i:02}" for i in range(0, 12, 2)]
    assert operators["operator"].tolist() == odd + even
