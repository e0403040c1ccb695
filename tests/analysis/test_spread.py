"""analysis.spread's quartiles and its "large spread" boundary, on inputs where a change of
quartile method or of the comparison shows (equally spaced steps, which every method reads
alike, do not)."""

from __future__ import annotations

import pytest

from profiling.analysis.spread import spread


def test_three_unequally_spaced_steps_have_the_linear_quartiles():
    """numpy's linear interpolation: q1 halfway between the first two steps, q3 between the
    last two. Tukey's hinges, Hazen's or Weibull's rule or the nearest step give others."""
    figures = spread([10.0, 60.0, 20.0])
    assert (figures["q1"], figures["median"], figures["q3"]) == (15.0, 20.0, 40.0)
    assert figures["iqr_pct"] == pytest.approx(125.0)


def test_four_unequally_spaced_steps_interpolate_between_steps():
    """Positions 0.75 and 2.25: midpoints (what three steps also give) would say 15 and 80."""
    figures = spread([10.0, 20.0, 60.0, 100.0])
    assert (figures["q1"], figures["q3"]) == (17.5, 70.0)
    assert figures["median"] == 40.0


@pytest.mark.parametrize(
    ("values", "large"),
    [
        ([95.0, 100.0, 105.0], False),  # IQR exactly 5% of the median: not above it
        ([94.9, 100.0, 105.1], True),
    ],
)
def test_a_spread_is_large_only_above_the_share(values, large):
    figures = spread(values, large=0.05)
    assert figures["large"] is large, figures


@pytest.mark.parametrize(
    ("values", "large"),
    [
        ([0.0, 75.0, 100.0, 125.0, 200.0], False),  # IQR exactly 50% of the median
        ([0.0, 74.0, 100.0, 126.0, 200.0], True),
        ([0.0, 60.0, 140.0, 200.0], True),  # 4 steps: said whatever the count (issue 31)
        ([10.0, 100.0, 300.0], True),  # 3 steps, as wide as the 1,200%
    ],
)
def test_a_large_spread_is_said_at_any_step_count(values, large):
    figures = spread(values, large=0.5)
    assert figures["large"] is large, figures
