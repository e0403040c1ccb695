"""Re-nesting lanes whose spans cross (profiling.trace.nesting.renest_crossings): scan.c's
`renest` and the Python loop it replaced (renest_lane, kept for a machine without a compiler)
give the loop's answer, depth, parent and overlap alike, on random lanes full of crossings and
of ends within EPS_US of each other (where a tolerance applied in another order would show)."""

from __future__ import annotations

import numpy as np
import pytest

from profiling.trace import nesting
from profiling.trace import scan as trace_scan
from profiling.trace.events import EPS_US


def loop_before(lane, start, end, depth, parent, overlap) -> None:
    """renest_crossings as it was before scan.c's `renest` (issue 42), verbatim: the oracle."""
    eps = EPS_US
    crossed = (parent >= 0) & (end > end[np.clip(parent, 0, None)] + eps)
    if not crossed.any():
        return
    bounds = np.flatnonzero(lane[1:] != lane[:-1]) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(lane)], strict=True):
        if not crossed[lo:hi].any():
            continue
        s, e = start[lo:hi].tolist(), end[lo:hi].tolist()
        stack: list[int] = []
        for i in range(hi - lo):
            while stack:
                top = stack[-1]
                if s[i] >= e[top] - eps:
                    stack.pop()
                elif e[i] > e[top] + eps:
                    overlap[lo + i] = overlap[lo + top] = True
                    stack.pop()
                else:
                    break
            parent[lo + i] = lo + stack[-1] if stack else -1
            depth[lo + i] = len(stack)
            stack.append(i)


def counted(lane, start, dur):
    """A table's arrays as the model hands them to renest_crossings: in display order, nested
    by counting."""
    order = nesting.display_order(lane, start, dur)
    lane, start, dur = lane[order], start[order], dur[order]
    end = start + dur
    depth, overlap = nesting.depth_and_overlap(lane, start, end)
    return lane, start, end, depth, nesting.parents(depth, lane), overlap


def random_lanes(seed: int):
    """Up to four lanes of spans on a grid of EPS_US / 2 (ends and starts often equal, or
    within the tolerance of each other), nested, crossing, or both."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 600))
    lane = rng.integers(0, 4, size)
    grid = EPS_US / 2 * (1 if seed % 2 else 1000)  # the tolerance's scale, and well above it
    start = rng.integers(0, 200, size) * grid
    dur = rng.integers(0, 60, size) * grid
    return counted(lane, start, dur)


def renested(arrays, renest):
    lane, start, end, depth, parent, overlap = (a.copy() for a in arrays)
    renest(lane, start, end, depth, parent, overlap)
    return depth, parent, overlap


@pytest.mark.parametrize("compiled", [True, False], ids=["scan.c", "python"])
@pytest.mark.parametrize("seed", range(40))
def test_renesting_gives_the_loops_answer_on_random_crossing_lanes(seed, compiled, monkeypatch):
    if compiled and trace_scan.scanner() is None:
        pytest.skip(f"no C scanner here: {'; '.join(trace_scan.REASON)}")
    if not compiled:
        monkeypatch.setattr(nesting, "scanner", lambda: None)
    arrays = random_lanes(seed)
    expected = renested(arrays, loop_before)
    got = renested(arrays, nesting.renest_crossings)
    for name, want, have in zip(("depth", "parent", "overlap"), expected, got, strict=True):
        assert np.array_equal(want, have), name


@pytest.mark.parametrize("compiled", [True, False], ids=["scan.c", "python"])
def test_a_with_stack_lane_is_renested_and_a_nested_lane_left_as_counted(compiled, monkeypatch):
    """Lane 0: a record_function that outlives the builtin frame it starts in, a child inside
    it, and ends and starts that differ by exactly EPS_US and by half of it. Lane 1: properly
    nested, left alone."""
    if compiled and trace_scan.scanner() is None:
        pytest.skip(f"no C scanner here: {'; '.join(trace_scan.REASON)}")
    if not compiled:
        monkeypatch.setattr(nesting, "scanner", lambda: None)
    eps = EPS_US
    spans = [  # (lane, start, dur)
        (0, 0.0, 100.0),  # frame
        (0, 10.0, 20.0),  # _record_function_enter_new
        (0, 20.0, 70.0),  # my_block: crosses the builtin's end at 30
        (0, 40.0, 10.0),  # inside my_block
        (0, 50.0, 40.0 + eps / 2),  # ends within the tolerance after my_block: held by it
        (0, 60.0, 30.0 + 2.5 * eps),  # ends past the tolerance: crosses both
        (0, 90.0 - eps / 2, 5.0),  # starts within it of my_block's end: my_block has ended
        (1, 0.0, 10.0),
        (1, 1.0, 2.0),
        (1, 3.0, 7.0),
    ]
    lane, start, dur = (np.array(column) for column in zip(*spans, strict=True))
    arrays = counted(lane, start, dur)
    expected = renested(arrays, loop_before)
    got = renested(arrays, nesting.renest_crossings)
    for name, want, have in zip(("depth", "parent", "overlap"), expected, got, strict=True):
        assert np.array_equal(want, have), name
    assert got[1].tolist() == [-1, 0, 0, 2, 2, 0, 0, -1, 7, 7]  # lane 1: as counted
    assert got[0].tolist() == [0, 1, 1, 2, 2, 1, 1, 0, 1, 1]
    assert got[2].tolist() == [False, True, True, False, True, True, True, False, False, False]
