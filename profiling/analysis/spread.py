"""The spread of a run's per-step figures: median and interquartile range over the measured
steps, and whether that spread is large enough to say so. The CPU µs per step a run reports is
this median (summary.forward_stats); the GPU µs per step is the steps' total ÷ their count (it
adds up over the kernel table and the phases), its median and IQR beside it.

Torch-free (the Summary is built from it, and the views read it). numpy's percentile with its
default linear interpolation is the definition: with 3 steps the quartiles are the midpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# An IQR above this share of the median is called large. GPU time per step moves by under 1% on
# a quiet H200; the host's CPU time per step by 10–40% over 10 steps there (issue 23's table in
# docs/results-h200.md): CPU time is called large beyond 50%. Whatever the number of steps
# (issue 31: a 3-step run with an IQR of 3,000% said nothing): with 2 or 3 steps the IQR is
# half the range or more, so a step 2–3× another is said, and more steps will tell.
LARGE_IQR = {"gpu_us": 0.05, "cpu_us": 0.50}


def spread(values: Sequence[float], large: float = LARGE_IQR["gpu_us"]) -> dict[str, Any] | None:
    """{median, q1, q3, iqr_pct, n, large} of `values` (None when there are none); large: the
    IQR above `large` × the median."""
    clean = np.asarray([v for v in values if v == v], dtype=float)  # NaN-free
    if not len(clean):
        return None
    q1, median, q3 = (float(x) for x in np.percentile(clean, [25, 50, 75]))
    iqr_pct = 100.0 * (q3 - q1) / median if median > 0 else 0.0
    return {
        "median": median,
        "q1": q1,
        "q3": q3,
        "iqr_pct": iqr_pct,
        "n": len(clean),
        "large": iqr_pct > 100 * large,
    }


def step_spread(cpu_us: Sequence[float], gpu_us: Sequence[float] | None) -> dict[str, Any]:
    """The spread of a run's CPU and (on a GPU) GPU µs per measured step."""
    figures = {"cpu_us": spread(cpu_us, LARGE_IQR["cpu_us"])}
    if gpu_us is not None:
        figures["gpu_us"] = spread(gpu_us, LARGE_IQR["gpu_us"])
    return {name: value for name, value in figures.items() if value is not None}


def large_text(value: dict[str, Any] | None) -> str:
    """`large spread: IQR 3,046% of the median` where the spread is large, else ''."""
    if not value or not value["large"]:
        return ""
    return f"large spread: IQR {value['iqr_pct']:,.0f}% of the median"


def large_spread_note(figures: dict[str, Any], per: str) -> str | None:
    """The note a run with a large spread carries (None when every figure is tight)."""
    names = {"cpu_us": "CPU", "gpu_us": "GPU"}
    wide = [
        f"{names[name]} µs/{per} IQR {value['iqr_pct']:.0f}% of the median"
        for name, value in figures.items()
        if value and value["large"]
    ]
    if not wide:
        return None
    return (
        f"large spread between the measured steps ({'; '.join(wide)}): the host or the GPU "
        "was not steady; more measured steps or another run will tell"
    )


def _iqr(value: dict[str, Any], digits: int) -> str:
    return f"IQR {value['q1']:,.{digits}f}–{value['q3']:,.{digits}f}"


def _large_tail(value: dict[str, Any], separator: str) -> str:
    """`{separator}large spread: …` where the spread is large, else ''."""
    large = large_text(value)
    return separator + large if large else ""


def _over_steps(value: dict[str, Any] | None, head: str, digits: int) -> str:
    """` ({head}IQR …, large spread: …)`, `head` formatted with the steps (n) and the median;
    '' for a single step (nothing to spread)."""
    if not value or value["n"] < 2:
        return ""
    said = head.format(n=value["n"], median=f"{value['median']:,.{digits}f}")
    return f" ({said}{_iqr(value, digits)}{_large_tail(value, ', ')})"


def mean_note(value: dict[str, Any] | None, digits: int = 1) -> str:
    """` (mean of 3 steps, as the kernel table adds up; median 57.8, IQR 57.5–58.1)`: the GPU
    headline is the steps' total ÷ steps, so the kernel rows sum to it; its median and IQR
    beside it, and a large spread said, as for the CPU's median."""
    head = "mean of {n} steps, as the kernel table adds up; median {median}, "
    return _over_steps(value, head, digits)


def spread_text(value: dict[str, Any] | None, digits: int = 1) -> str:
    """`57.8 (IQR 57.5–58.1, 3 steps)`, `…, 3 steps; large spread: IQR 60% of the median)`."""
    if not value:
        return "n/a"
    median = f"{value['median']:,.{digits}f}"
    return f"{median} ({_iqr(value, digits)}, {value['n']} steps{_large_tail(value, '; ')})"


def median_note(value: dict[str, Any] | None, digits: int = 1) -> str:
    """` (median of 3, IQR 4,180.0–200,212.0, large spread: …)`: what a headline median is
    over; '' for a single step (nothing to spread)."""
    return _over_steps(value, "median of {n}, ", digits)
