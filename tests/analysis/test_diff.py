"""Diff: per-kernel and per-operator deltas, on H200 fixtures and on two CPU runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from profiling.analysis.diff import KERNEL_DIFF_COLUMNS, OPERATOR_DIFF_COLUMNS, diff, labelled
from profiling.analysis.summary import per_forward
from profiling.run.runner import run
from profiling.trace import model as trace
from profiling.views import diff as views_diff
from profiling.workload.spec import Workload
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
    # nothing moved: every row says so, and ranks after the noise (CHANGES' last)
    assert (kernels["change"] == "none").all() and (operators["change"] == "none").all()


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
        "spread µs", "self spread µs", "change",
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
    from profiling.views import diff as views_diff

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
    assert "fwd, 1 attn_fwd span; step, 1 ProfilerStep (no" in scopes and "⚠" in scopes


def test_markdown_in_names_and_labels_stays_text_in_the_headline():
    """A name like `*mm*` or `[l](http://e)` from an uploaded trace, or a label `_old_`, must
    not become italics or a link chosen by whoever made the trace."""
    from profiling.views import diff as views_diff

    a = _cpu_trace(True, 10.0, 1)
    b = _cpu_trace(True, 10.0, 2)
    b.spans["name"] = b.spans["name"].cat.rename_categories(
        lambda n: "aten::*fill* [l](http://e)" if n == "aten::fill_" else n
    )
    page = views_diff.diff_page(a, b, "_old_", "new")
    assert "aten::*fill* [l](http://e)" in page.headline  # plain text, as /diff returns it
    markdown, _, _ = views_diff.result_view(page.headline, page.kernels)  # what the page shows
    assert r"aten::\*fill\* \[l\](http://e)" in markdown
    assert r"\_old\_" in markdown


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


# -- structural change first, time within the runs' own spread marked noise (issue 19) ------
INPLACE = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"


def _forwards(*windows: dict[str, list[float]]):
    """One attn_fwd span per dict, holding each operator once per duration listed (µs)."""
    from tests.conftest import from_document

    events = []
    for i, ops in enumerate(windows):
        start = i * 10_000
        events.append({"ph": "X", "name": "attn_fwd", "ts": start, "dur": 9_000,
                       "cat": "user_annotation", "pid": 1, "tid": 1})  # fmt: skip
        at = start + 10
        for name, durations in ops.items():
            for dur in durations:
                events.append({"ph": "X", "name": name, "ts": at, "dur": dur, "cat": "cpu_op",
                               "pid": 1, "tid": 1})  # fmt: skip
                at += dur + 5
    return from_document({"traceEvents": events})


def test_h200_inplace_leads_with_the_copy_and_calls_the_cpu_jitter_noise():
    """naive against naive-inplace: the same kernels but the copy, the same operators but the
    copy's; the in-place trace's CPU side ran slower throughout (aten::matmul +103 µs), which
    its own forwards' spread covers, so that is not the news."""
    kernels, operators = diff(NAIVE, INPLACE, "naive", "naive-inplace")
    change = kernels.set_index("kernel")["change"]
    assert change["Memcpy DtoD"] == "count"
    assert (change.drop("Memcpy DtoD") == "noise").all()  # ±0.7 µs against spreads of 1.5–4 µs
    gemm = kernels.set_index("kernel").loc["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"]
    assert gemm["spread_us"] == pytest.approx(3.871, abs=1e-3)  # 2.1 on A, 1.8 on B
    ops = operators.set_index("operator")
    assert (
        ops.loc["aten::matmul", "delta_us"] > 100 and ops.loc["aten::matmul", "change"] == "noise"
    )
    assert ops.loc["aten::bmm", "change"] == "noise"
    counted = operators[operators["change"] == "count"]
    assert operators.index[: len(counted)].tolist() == counted.index.tolist()  # they lead
    assert operators["operator"].iloc[0] == "aten::masked_fill"  # the copy, by its cost
    assert "aten::expand" in set(counted["operator"])  # 7 → 5 calls: listed, not first
    assert operators.set_index("operator").index.get_loc("aten::expand") > 2
    # the headline read off the GPU work, and off the operators alone (as of a CPU run)
    headline = views_diff.diff_headline(kernels, operators)
    assert headline.startswith("naive-inplace has 1 fewer Memcpy DtoD per forward (−126.5 µs)")
    cpu = views_diff.diff_headline(kernels.iloc[0:0], operators)
    assert "the largest change: 1 fewer aten::masked_fill (self −6.5 µs)." in cpu
    assert "expand" not in cpu and "The largest change in self time" not in cpu
    assert cpu.endswith("aten::bmm's +56.3 µs lies within the runs' step-to-step spread: noise.")
    assert "self 133.2 → 228.1 µs, +94.9 µs, within noise" in cpu


def test_a_same_op_change_within_the_spread_is_noise():
    """aten::bmm takes 100–300 µs from one forward to the next on both sides: B's mean 100 µs
    higher is noise; aten::mm 40 µs slower in every forward is a change."""
    a = _forwards(*({"aten::bmm": [bmm], "aten::mm": [10]} for bmm in (100, 300, 200)))
    b = _forwards(*({"aten::bmm": [bmm], "aten::mm": [50]} for bmm in (200, 400, 300)))
    _, operators = diff(a, b)
    ops = operators.set_index("operator")
    assert ops.loc["aten::bmm", "delta_us"] == 100 and ops.loc["aten::bmm", "spread_us"] == 400
    assert ops.loc["aten::bmm", "spread_self_us"] == 400
    assert ops.loc["aten::bmm", "change"] == "noise"
    assert ops.loc["aten::mm", "spread_us"] == 0 and ops.loc["aten::mm", "change"] == "time"
    assert operators["operator"].tolist() == ["aten::mm", "aten::bmm"]  # noise ranks after
    headline = views_diff.diff_headline(*diff(a, b))
    assert headline == (
        "B runs the same operator calls as A per forward (2 → 2, self 210.0 → 350.0 µs, "
        "+140.0 µs, within noise; no GPU work in either trace); the largest change is aten::mm "
        "(self +40.0 µs). aten::bmm's +100.0 µs lies within the runs' step-to-step spread: noise."
    )
    # only noise: said so, nothing named as the change
    c = _forwards(*({"aten::bmm": [bmm], "aten::mm": [10]} for bmm in (200, 400, 300)))
    assert views_diff.diff_headline(*diff(a, c)).endswith(
        "every change in time lies within the runs' step-to-step spread: noise."
    )
    # in totals (not per forward) the spread is in the same unit: over the three forwards
    _, totals = diff(a, b, per_forward=False)
    bmm = totals.set_index("operator").loc["aten::bmm"]
    assert (bmm["delta_us"], bmm["spread_us"], bmm["change"]) == (300, 1200, "noise")


def test_fewer_calls_whose_time_rose_by_noise_do_not_lead():
    """The issue's headline: '2 fewer aten::expand (self +2,683.3 µs)' while the copy was what
    changed. Fewer calls cannot cost more time: the rise is jitter, and the removed copy
    (aten::masked_fill, 30 µs in every forward) leads."""
    a = _forwards(*({"aten::expand": [1] * 7, "aten::masked_fill": [30]} for _ in range(3)))
    b = _forwards(
        {"aten::expand": [1] * 5}, {"aten::expand": [1] * 4 + [8_000]}, {"aten::expand": [1] * 5}
    )
    _, operators = diff(a, b, "naive", "naive-inplace")
    assert operators["operator"].tolist() == ["aten::masked_fill", "aten::expand"]
    expand = operators.set_index("operator").loc["aten::expand"]
    assert expand["change"] == "count" and expand["delta_self_us"] > 2_600
    headline = views_diff.diff_headline(*diff(a, b, "naive", "naive-inplace"))
    assert "the largest change: 1 fewer aten::masked_fill (self −30.0 µs)." in headline
    assert "aten::expand's +2,664.3 µs lies within the runs' step-to-step spread" in headline
    # one forward per side: no spread can be read, and the scopes line says so
    one_a, one_b = _forwards({"aten::mm": [10]}), _forwards({"aten::mm": [50]})
    kernels, operators = diff(one_a, one_b)
    mm = operators.set_index("operator").loc["aten::mm"]
    assert np.isnan(mm["spread_us"]) and mm["change"] == "time"
    assert "No step-to-step spread: A and B have fewer than two windows" in views_diff.diff_scopes(
        kernels
    )


def test_each_span_is_given_the_window_starts_inside_puts_it_in():
    """The spread reads each span's window off one sorted search per thread; it must put every
    span where starts_inside, window by window, does: steps hold every thread, forwards their
    own (a generated trace with ~20 forwards and steps, and launches on a second thread)."""
    from benchmarks import gen_trace
    from profiling.analysis.diff import _window_of, windows
    from profiling.analysis.summary import starts_inside
    from tests.conftest import from_document

    document = gen_trace.generate(5_000)
    for event in document["traceEvents"][::7]:  # some spans move to another thread
        if event.get("cat") in ("cpu_op", "cuda_runtime"):
            event["tid"] = 999
    generated = from_document(document)
    spans = generated.spans
    rows = np.flatnonzero(spans["kind"].astype(str) == "cpu")
    for win in (windows(generated)[0], generated.steps()):  # the attn_fwd spans, the steps
        assert len(win) > 10
        found = _window_of(spans, rows, win)
        spots = spans.index.get_indexer(win.index)
        for i, spot in enumerate(spots):
            inside = starts_inside(spans, rows, np.array([spot]))
            assert np.array_equal(found == i, inside), f"window {i}"
        # a span in no window reads -1 (the docstring's "none"), not some other marker
        anywhere = starts_inside(spans, rows, spots)
        assert np.array_equal(found == -1, ~anywhere)
    assert (_window_of(spans, rows, windows(generated)[0]) == -1).sum() > 100  # some are out


def _window_of_by_passes(s, rows, win):
    """The spread's rule as it was first written, one pass over every row per window: the
    oracle for the sorted searches that replaced it."""
    from profiling.analysis.diff import ALL_THREADS

    start, end = s["start_us"].to_numpy(), s["end_us"].to_numpy()
    spots = s.index.get_indexer(win.index)
    thread = s.groupby(["pid", "tid"], observed=True, sort=False).ngroup().to_numpy()
    names = win["name"].astype(str)
    every = (names.str.startswith("ProfilerStep#") | names.isin(ALL_THREADS)).to_numpy()
    times, found = start[rows], np.full(len(rows), -1)
    for position in np.argsort(start[spots], kind="stable"):
        spot = spots[position]
        inside = (times >= start[spot]) & (times <= end[spot])
        if not every[position]:
            inside &= thread[rows] == thread[spot]
        found[inside] = position
    return found


def test_nested_windows_give_a_span_to_the_innermost_as_one_pass_per_window_did():
    """Forwards inside steps, shuffled: a span in both belongs to the forward (the later
    start), on its own thread only; the sorted searches agree with a pass per window."""
    from benchmarks import gen_trace
    from profiling.analysis.diff import _window_of, windows
    from tests.conftest import from_document

    document = gen_trace.generate(5_000)
    for event in document["traceEvents"][::7]:
        if event.get("cat") in ("cpu_op", "cuda_runtime"):
            event["tid"] = 999
    generated = from_document(document)
    spans = generated.spans
    rows = np.flatnonzero(spans["kind"].astype(str) == "cpu")
    nested = pd.concat([windows(generated)[0], generated.steps()]).sample(frac=1, random_state=0)
    found = _window_of(spans, rows, nested)
    assert np.array_equal(found, _window_of_by_passes(spans, rows, nested))
    steps = nested["name"].astype(str).str.startswith("ProfilerStep#").to_numpy()
    assert (~steps[found[found >= 0]]).sum() > 100 and steps[found[found >= 0]].sum() > 100


def test_structural_weight_reads_each_rule():
    """What a count change costs decides which leads the table and the headline. Each row here
    is decided by one rule of structural_weight, worked out by hand; a one-sided row's 0/0 per
    call is masked quietly (no RuntimeWarning in the app's log)."""
    import warnings

    import pandas as pd

    from profiling.analysis.diff import structural_weight

    rows = [  # count_a, count_b, total_us_a, total_us_b, spread_us, where: expected weight
        (1, 0, 7, 0, 0, "a", 7),  # only in A: all of its time
        (0, 2, 0, 9, 0, "b", 9),  # only in B: likewise
        (8, 6, 2, 2_690, 0, "both", 0.5),  # time against the count: 2 calls × 0.25 µs
        (2, 3, 20, 60, 10, "both", 30),  # with the count: +40 µs beyond a 10 µs spread
        (1, 2, 10, 50, np.nan, "both", 40),  # no spread known: all of the +40 µs
        (1, 2, 10, 12, 0, "both", 6),  # one call per forward on A: 1 × min(10, 6) µs
        (2, 1, 12, 10, 0, "both", 6),  # one on B: 1 × min(6, 10) µs
    ]
    columns = ["count_a", "count_b", "total_us_a", "total_us_b", "spread_us", "where"]
    table = pd.DataFrame([row[:-1] for row in rows], columns=columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = structural_weight(table)
    assert weights.tolist() == pytest.approx([row[-1] for row in rows])


def test_spread_counts_a_missing_name_or_an_empty_window_as_zero():
    """A forward without an operator ran it for 0 µs (a forward with nothing at all, too); a
    name on one side only has that side's spread; two windows are enough to read one; the
    sums' spread adds A's and B's, and scales with the windows in totals."""
    a = _forwards({"aten::mm": [10], "aten::bmm": [20]}, {"aten::mm": [10]}, {})
    b = _forwards(
        {"aten::mm": [10], "aten::bmm": [20], "aten::add": [5]},
        {"aten::mm": [10], "aten::bmm": [20], "aten::add": [9]},
    )
    _, same = diff(a, a)
    spread = same.set_index("operator")["spread_us"]
    assert (spread["aten::mm"], spread["aten::bmm"]) == (20, 40)  # A's 10 and 20, twice
    assert same.attrs["sum_spread"] == {"total_us": 60, "self_us": 60}  # sums 30, 10, 0
    _, totals = diff(a, a, per_forward=False)
    assert totals.set_index("operator").loc["aten::mm", "spread_us"] == 60  # × 3 forwards
    assert totals.attrs["sum_spread"]["total_us"] == 180
    _, operators = diff(a, b)
    ops = operators.set_index("operator")
    assert ops.loc["aten::add", "where"] == "b" and ops.loc["aten::add", "spread_us"] == 4
    assert (ops.loc["aten::mm", "spread_us"], ops.loc["aten::bmm", "spread_us"]) == (10, 20)
    assert operators.attrs["sum_spread"] == {"total_us": 34, "self_us": 34}  # 30 + 4
    measures = [c for c in OPERATOR_DIFF_COLUMNS if c not in ("operator", "where", "change")]
    assert (operators[measures].dtypes == np.float64).all()  # numbers for library callers


def test_a_change_as_large_as_the_spread_is_noise():
    """The spread is inclusive: B 100 µs slower on average, with a 100 µs spread, is noise."""
    a = _forwards({"aten::mm": [100]}, {"aten::mm": [100]})
    b = _forwards({"aten::mm": [150]}, {"aten::mm": [250]})
    _, operators = diff(a, b)
    mm = operators.set_index("operator").loc["aten::mm"]
    assert (mm["delta_us"], mm["spread_us"], mm["change"]) == (100, 100, "noise")


def test_a_span_at_a_window_end_counts_in_that_window():
    """starts_inside counts a span that starts exactly as a forward ends (the totals do), so
    the spread must read it in that forward too."""
    from tests.conftest import from_document

    def X(name, ts, dur, cat="cpu_op"):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": 1, "tid": 1}

    events = [X("attn_fwd", 0, 100, "user_annotation"), X("aten::mm", 100, 10)]
    events += [X("attn_fwd", 1_000, 100, "user_annotation"), X("aten::mm", 1_100, 30)]
    both = from_document({"traceEvents": events})
    _, operators = diff(both, both)
    mm = operators.set_index("operator").loc["aten::mm"]
    assert (mm["count_a"], mm["total_us_a"], mm["spread_us"]) == (1, 20, 40)


def test_a_redispatch_to_itself_adds_no_time_to_its_window():
    """An op's span inside a span of its own name is one call (as operator_sums counts it):
    the forward where aten::to redispatched took as long as the one where it did not."""
    from tests.conftest import from_document

    def X(name, ts, dur):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": "cpu_op", "pid": 1, "tid": 1}

    events = []
    for i in range(2):
        events += [{**X("attn_fwd", i * 1_000, 900), "cat": "user_annotation"}]
        events += [X("aten::to", i * 1_000 + 10, 20)]
    events += [X("aten::to", 12, 15)]  # the first forward's redispatch
    trace_ = from_document({"traceEvents": events})
    _, operators = diff(trace_, trace_)
    to = operators.set_index("operator").loc["aten::to"]
    assert (to["count_a"], to["total_us_a"], to["spread_us"]) == (1, 20, 0)
    assert (to["self_us_a"], to["spread_self_us"]) == (20, 0)  # 5 + 15 µs against 20


def test_a_span_after_a_nested_window_ended_is_still_in_its_outer_window():
    """Nested attn_fwd spans on one thread: an op that starts inside the outer window after the
    inner one has ended belongs to the outer one, in the spread as in the totals (found by the
    issue 17 mutation run: its spread read 0 where it is 90)."""
    from profiling.analysis.diff import _operator_rows, windows
    from tests.conftest import from_document

    def event(name, ts, dur, cat="cpu_op"):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": 1, "tid": 1,
                "args": {}}  # fmt: skip

    events = [
        event("attn_fwd", 0, 100, "user_annotation"),
        event("attn_fwd", 10, 20, "user_annotation"),  # nested, ends at 30
        event("aten::bmm", 50, 5),  # in the outer window only
        event("attn_fwd", 200, 100, "user_annotation"),
        event("aten::bmm", 250, 50),
    ]
    trace = from_document({"traceEvents": events})
    win, _, _ = windows(trace)
    rows = _operator_rows(trace, win)
    outer = [win["start_us"].tolist().index(0.0), win["start_us"].tolist().index(200.0)]
    assert rows.loc[rows["name"] == "aten::bmm", "window"].tolist() == outer


def test_kernels_without_a_role_make_one_sentence_per_side():
    """Issue 31: a recommendation model's unknown kernels made one headline sentence each."""
    from profiling.analysis.role_views import role_diff, role_lines

    recsys = trace.load(FIXTURES / "generated" / "recsys_v100_3steps.json.gz")
    lines = role_lines(role_diff(recsys, trace.load(NAIVE)), ("recsys", "naive"))
    unknown = [line for line in lines if "no known role" in line]
    assert len(unknown) == 1, lines
    assert unknown[0].startswith("recsys spends ")
    assert "in 3 kernels with no known role" in unknown[0]
    assert "permute_2D_data_kernel" in unknown[0] and unknown[0].endswith("naive runs none of them")
    # the roles only one side has stay one sentence each: recsys's GEMMs, naive's QKᵀ
    assert any(line.startswith("recsys spends") and " on GEMM;" in line for line in lines)
    assert any(line.startswith("naive spends") and " on QKᵀ;" in line for line in lines)
    page = views_diff.diff_page(recsys, trace.load(NAIVE), "recsys", "naive")
    by_role = next(part for part in page.headline.split("\n\n") if part.startswith("By role"))
    assert by_role.count("no known role") <= 1
