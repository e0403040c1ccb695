"""One workload's runs over time, and which of them are regressions.

The rule, decided here and stated on the page (RULE): a run is a regression when its median
time per step is slower than the median of all earlier runs of the same workload on the same
device by more than both 10% of that median and the earlier runs' spread (the interquartile
range of their medians). The first run has nothing to compare with and is never flagged. The
time is GPU µs on a GPU, CPU µs on a CPU (what a CPU run has).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SLOWER_BY = 0.10
RULE = (
    "A run is flagged as a regression when its median time per step is slower than the median "
    f"of the earlier runs of the same workload on the same device by more than both "
    f"{SLOWER_BY:.0%} of that median and the earlier runs' spread (the interquartile range of "
    "their medians). The first run is never flagged."
)
TREND_COLUMNS = ["id", "created", "basis", "median_us", "q1_us", "q3_us", "baseline_us",
                 "spread_us", "regression"]  # fmt: skip


def _times(runs: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """(GPU or CPU, each run's median, q1, q3 in µs) from the runs' stored columns."""
    gpu = runs["gpu_us_median"].notna().all() and len(runs) > 0
    prefix = "gpu_us" if gpu else "cpu_us"
    times = runs[[f"{prefix}_median", f"{prefix}_q1", f"{prefix}_q3"]].astype(float)
    times.columns = ["median_us", "q1_us", "q3_us"]
    return ("GPU" if gpu else "CPU"), times


def trend(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs (query.workload_runs: oldest first) with each one's baseline, the earlier runs'
    spread, and the regression flag of RULE."""
    basis, times = _times(runs)
    medians = times["median_us"].to_numpy()
    baseline, spread, flagged = [], [], []
    for index, value in enumerate(medians):
        earlier = medians[:index][~np.isnan(medians[:index])]
        base, wide = np.nan, np.nan
        if len(earlier):
            base = float(np.median(earlier))
            q1, q3 = np.percentile(earlier, [25, 75])
            wide = float(q3 - q1)
        baseline.append(base)
        spread.append(wide)
        slower = value - base  # NaN (never flagged) for the first run or a run without a time
        flagged.append(bool(slower > SLOWER_BY * base and slower > wide))
    out = pd.DataFrame({"id": runs["id"], "created": runs["created"], "basis": basis})
    out = pd.concat([out.reset_index(drop=True), times.reset_index(drop=True)], axis=1)
    return out.assign(baseline_us=baseline, spread_us=spread, regression=flagged)[TREND_COLUMNS]
