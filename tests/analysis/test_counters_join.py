"""Issue 41: the counter join's rules that a single change broke without a test noticing. Each
ncu kernel takes the next profiled kernel of its function (never one already taken); a
profiled kernel's figures are the mean of its matched calls; the gap is measured against
modelled (+18% when ncu moved more); a phase's table takes only that phase's counters. The
profiled kernels are a real H200 training trace's; ncu's rows are made from them (one per
profiled kernel, in launch order, distinct figures), so the expected join is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from profiling.analysis import counters_join as join
from profiling.analysis.counters import COLUMNS, Counters
from profiling.run import trace as run_trace
from tests.conftest import FIXTURES

# sdpa-math's training step: 20 kernels, 5 full names launched more than once, 3 functions
# under several full names (e.g. GEMMs of one nvjet function, different template arguments)
MATH = FIXTURES / "h200_train-sdpa-math_8_16_1024_64_bf16.json.gz"
NAIVE = FIXTURES / "h200_train-naive_8_16_1024_64_bf16.json.gz"


def _ncu_rows(profiled: list[tuple[str, str]]) -> Counters:
    """What ncu would report for exactly the profiled step: one row per kernel, its function
    name as ncu spells it, figures that differ per call (call i read 1000·(i+1) bytes)."""
    n = len(profiled)
    frame = pd.DataFrame({column: np.nan for column in COLUMNS}, index=range(n))
    frame["index"] = range(n)
    frame["kernel"] = [join.function_name(name) for _, name in profiled]
    frame["demangled"] = [name for _, name in profiled]
    for offset, column in enumerate(join.MEASURED):
        frame[column] = [1000.0 * (i + 1) + offset for i in range(n)]
    return Counters(kernels=frame)


def test_each_ncu_kernel_takes_its_own_profiled_kernel_and_calls_are_averaged():
    trace = run_trace.read(MATH)
    profiled = join.step_kernels(trace.phases)
    assert len(set(profiled)) < len(profiled)  # full names launched more than once
    functions = {join.function_name(name) for _, name in profiled}
    assert len(functions) < len(set(profiled))  # one function under several full names
    measured, words = join.per_kernel(_ncu_rows(profiled), trace.phases)
    assert f"{len(profiled)} of the profiled step's {len(profiled)} matched" in words
    expected = (
        pd.DataFrame({"phase": [p for p, _ in profiled], "name": [n for _, n in profiled],
                      "read": [1000.0 * (i + 1) + 1 for i in range(len(profiled))]})
        .groupby(["phase", "name"], sort=False)["read"].agg(["mean", "size"]).reset_index()
    )  # fmt: skip
    assert (
        measured[["phase", "name"]].values.tolist() == expected[["phase", "name"]].values.tolist()
    )
    assert measured["dram_read_bytes"].tolist() == expected["mean"].tolist()  # the mean, not sum
    assert measured["measured_calls"].tolist() == expected["size"].tolist()
    assert measured["measured_calls"].max() > 1  # a kernel launched more than once


def test_a_phases_table_takes_only_that_phases_counters():
    """With a second phase measured under the same kernel names (a training step's backward),
    the forward's table keeps one row per kernel, with the forward's figures."""
    trace = run_trace.read(NAIVE)
    measured, _ = join.per_kernel(_ncu_rows(join.step_kernels(trace.phases)), trace.phases)
    backward = measured.assign(phase="attn_bwd", dram_read_bytes=measured["dram_read_bytes"] * 7)
    both = pd.concat([measured, backward], ignore_index=True)
    kernels = trace.phases["attn_fwd"].kernels
    joined = join.with_kernels(kernels, both, "attn_fwd")
    assert len(joined) == len(kernels) == 7
    forward = dict(zip(measured["name"], measured["dram_read_bytes"], strict=True))
    got = joined.dropna(subset=["dram_read_bytes"])
    assert dict(zip(got["name"], got["dram_read_bytes"], strict=True)) == forward


@pytest.mark.parametrize(
    ("modelled", "read", "written", "said"),
    [
        (100e6, 100e6, 18e6,
         "modelled 100.0 MB, measured 118.0 MB (read 100.0 MB, written 18.0 MB) (+18%)"),
        (100e6, 60e6, 25e6,
         "modelled 100.0 MB, measured 85.0 MB (read 60.0 MB, written 25.0 MB) (-15%)"),
        (0.0, 1e6, 0.0, "modelled 0.0 MB, measured 1.0 MB (read 1.0 MB, written 0.0 MB)"),
        (None, 2e6, 1e6, "not modelled, measured 3.0 MB (read 2.0 MB, written 1.0 MB)"),
        (100e6, None, 1e6, ""),
        (100e6, float("nan"), 1e6, ""),  # a kernel ncu did not measure: NaN after the join
        (float("nan"), 2e6, 1e6, "not modelled, measured 3.0 MB (read 2.0 MB, written 1.0 MB)"),
        (100e6, 150e6, 50e6,
         "modelled 100.0 MB, measured 200.0 MB (read 150.0 MB, written 50.0 MB) (+100%)"),
        (1e6, 1.05e6, 0.0, "modelled 1.0 MB, measured 1.1 MB (read 1.1 MB, written 0.0 MB) (+5%)"),
    ],
)  # fmt: skip
def test_the_gap_is_measured_against_modelled(modelled, read, written, said):
    assert join.gap(modelled, read, written) == said


def test_the_glance_gives_the_steps_dram_megabytes_or_why_there_are_none():
    trace = run_trace.read(NAIVE)
    counters = _ncu_rows(join.step_kernels(trace.phases))
    read, written = (counters.kernels[c].sum() for c in ("dram_read_bytes", "dram_write_bytes"))
    counters.seconds = 14.6
    assert join.glance_figures(counters) == {
        "DRAM MB read (ncu)": read / 1e6, "DRAM MB written (ncu)": written / 1e6,
        "counters": "measured (15 s under ncu)",
    }  # fmt: skip
    refused = Counters(reason="ncu is not installed")
    assert join.glance_figures(refused) == {
        "DRAM MB read (ncu)": None, "DRAM MB written (ncu)": None,
        "counters": "ncu is not installed",
    }  # fmt: skip
    assert join.glance_figures(None) == {}


def test_the_roofline_takes_ncus_bytes_only_where_counters_were_measured():
    trace = run_trace.read(NAIVE)
    profiled = join.step_kernels(trace.phases)
    rows = pd.DataFrame({"phase": [p for p, _ in profiled], "name": [n for _, n in profiled],
                         "bytes_per_call": 1e6, "flop_per_call": 1e9})  # fmt: skip
    rows = rows.drop_duplicates()
    counters = _ncu_rows(profiled)
    for none in (None, Counters(reason="ncu is not installed")):
        assert join.measured_roofline(rows, none, trace.phases) is rows
    measured = join.measured_roofline(rows, counters, trace.phases)
    expected = join.with_roofline(rows, join.per_kernel(counters, trace.phases)[0])
    pd.testing.assert_frame_equal(measured, expected)
    assert measured["measured_bytes_per_call"].notna().all()
