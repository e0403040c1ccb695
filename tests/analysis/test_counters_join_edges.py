"""The counter join at its edges (issue 41: mutants that the real traces' joins could not tell
apart): a one-step phase keeps all its kernels, every phase is kept, a kernel matched at
position 0 is taken once, an unmatched ncu kernel does not send the search back, a report with
no matches or a figure that is not a number still gives a table, an unmeasured kernel keeps its
row and its own occupancy. Inputs are made here, each small enough to read."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from profiling.analysis import counters_join as join
from profiling.analysis.counters import COLUMNS, Counters


def phase(names: list[str], steps: int) -> SimpleNamespace:
    return SimpleNamespace(spans=SimpleNamespace(names=names), steps=steps)


def ncu(kernels: list[str], **figures: list) -> Counters:
    frame = pd.DataFrame({column: np.nan for column in COLUMNS}, index=range(len(kernels)))
    frame["index"] = range(len(kernels))
    frame["kernel"] = kernels
    for column in join.MEASURED:
        frame[column] = figures.get(column, [1.0] * len(kernels))
    return Counters(kernels=frame)


def test_one_steps_kernels_of_every_phase_copies_left_out():
    phases = {
        "forward": phase(["void a<int>(int)", "Memcpy HtoD", "b()"], steps=1),
        "backward": phase(["c()", "d()", "c()", "d()"], steps=2),
    }
    assert join.step_kernels(phases) == [
        ("forward", "void a<int>(int)"), ("forward", "b()"), ("backward", "c()"),
        ("backward", "d()"),
    ]  # fmt: skip
    assert ("forward", "Memcpy HtoD") in join.step_kernels(phases, copies=True)


def test_a_kernel_matched_at_the_first_position_is_not_taken_twice():
    profiled = [("forward", "a()"), ("forward", "b()"), ("forward", "a()")]
    positions, words = join.match(profiled, ncu(["a", "a"]).kernels)
    assert positions == [0, 2]
    assert words == (
        "ncu measured 2 kernels of one step; 2 of the profiled step's 3 matched to them by "
        "function name in launch order; 1 profiled not measured (ncu's cap, or not seen)"
    )


def test_an_unmatched_ncu_kernel_does_not_send_the_search_back():
    profiled = [("forward", "a()"), ("forward", "b()"), ("forward", "a()")]
    positions, words = join.match(profiled, ncu(["b", "elsewhere", "a"]).kernels)
    assert positions == [1, -1, 2]
    assert words.endswith("; 1 measured outside the profiled phases")


def test_a_report_that_matches_nothing_gives_an_empty_table_with_its_columns():
    phases = {"forward": phase(["a()"], steps=1)}
    measured, words = join.per_kernel(ncu(["other"]), phases)
    assert measured.empty
    assert list(measured.columns) == ["phase", "name", *join.MEASURED, "measured_calls"]
    assert "0 of the profiled step's 1 matched" in words


def test_a_figure_that_is_not_a_number_is_left_out_of_the_mean():
    phases = {"forward": phase(["a()", "a()"], steps=1)}
    counters = ncu(["a", "a"], dram_read_bytes=["n/a", 300.0])
    measured, _ = join.per_kernel(counters, phases)
    assert measured["dram_read_bytes"].tolist() == [300.0]
    assert measured["measured_calls"].tolist() == [2]


def test_a_kernel_ncu_did_not_measure_keeps_its_roofline_row():
    rows = pd.DataFrame({"phase": ["forward", "forward"], "name": ["a()", "b()"],
                         "bytes_per_call": [1e6, 2e6], "flop_per_call": [1e9, 2e9]})  # fmt: skip
    measured = pd.DataFrame({"phase": ["forward"], "name": ["a()"],
                             "dram_read_bytes": [6e5], "dram_write_bytes": [4e5]})  # fmt: skip
    joined = join.with_roofline(rows, measured)
    assert joined["name"].tolist() == ["a()", "b()"]
    assert joined["measured_bytes_per_call"].tolist()[0] == 1e6
    assert np.isnan(joined["measured_bytes_per_call"].tolist()[1])
    assert joined["measured_intensity"].tolist()[0] == 1000.0


def test_an_unmeasured_kernel_keeps_cuptis_occupancy_and_the_table_its_columns():
    kernels = pd.DataFrame({"name": ["a()", "b()"], "occupancy_pct": [50.0, 25.0],
                            "occupancy_note": ["", ""]})  # fmt: skip
    measured = pd.DataFrame({"phase": ["forward", "backward"], "name": ["a()", "b()"],
                             **{c: [80.0, 90.0] for c in join.MEASURED}})  # fmt: skip
    joined = join.with_kernels(kernels, measured, "forward")
    assert list(joined.columns) == ["name", "occupancy_pct", "occupancy_note", *join.MEASURED]
    assert joined["occupancy_pct"].tolist() == [80.0, 25.0]  # a: ncu's achieved; b: CUPTI's
    assert joined["occupancy_note"].tolist() == [join.ACHIEVED_NOTE, ""]
