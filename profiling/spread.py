"""The spread of a run's per-step figures: median and interquartile range over the measured
steps, and whether that spread is large enough to say so.

Torch-free (the Summary is built from it, and the views read it). numpy's percentile with its
default linear interpolation is the definition: with 3 steps the quartiles are the midpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# An IQR above this share of the median is called large. GPU time per step moves by under 1% on
# a quiet H200; the host's CPU time per step by 10–40% over 10 steps there (issue 23's table in
# docs/results-h200.md), and over a click's 3 steps the first one's profiler start alone moved
# it by half: CPU time is called large beyond 50%, and only over at least 5 steps.
LARGE_IQR = {"gpu_us": 0.05, "cpu_us": 0.50}
MIN_STEPS = {"gpu_us": 1, "cpu_us": 5}


def spread(
    values: Sequence[float], large: float = LARGE_IQR["gpu_us"], min_steps: int = 1
) -> dict[str, Any] | None:
    """{median, q1, q3, iqr_pct, n, large} of `values` (None when there are none); large: the
    IQR above `large` × the median, over at least `min_steps` values."""
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
        "large": iqr_pct > 100 * large and len(clean) >= min_steps,
    }


def step_spread(cpu_us: Sequence[float], gpu_us: Sequence[float] | None) -> dict[str, Any]:
    """The spread of a run's CPU and (on a GPU) GPU µs per measured step."""
    figures = {"cpu_us": spread(cpu_us, LARGE_IQR["cpu_us"], MIN_STEPS["cpu_us"])}
    if gpu_us is not None:
        figures["gpu_us"] = spread(gpu_us, LARGE_IQR["gpu_us"], MIN_STEPS["gpu_us"])
    return {name: value for name, value in figures.items() if value is not None}


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


def spread_text(value: dict[str, Any] | None, digits: int = 1) -> str:
    """`57.8 (IQR 57.5–58.1, 3 steps)`."""
    if not value:
        return "n/a"
    return (
        f"{value['median']:,.{digits}f} (IQR {value['q1']:,.{digits}f}–{value['q3']:,.{digits}f}"
        f", {value['n']} steps)"
    )
