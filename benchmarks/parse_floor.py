"""What the app's post-processing costs on its own, in a tight loop (issue #7 overhead).

    python benchmarks/parse_floor.py          # on the H200 host, and on this machine

click_stages.py times these steps inside a run, right after the profiler and the GPU work.
Here the same steps (trace load, forward attribution, per-forward figures, kernel table,
Gantt + JSON) repeat back to back on stored H200 traces: the least they cost on a host. Also
timed: building a small pandas frame from lists of strings, from object arrays and from
floats (pandas 3 infers its `str` dtype either way; with pyarrow installed it stores them
there), to see whether typed input would make the tables cheaper. Best of 5 × 300, in µs.
Last, where each step's time goes by library (cProfile's own time per function, summed by the
file's package): the share a run path without pandas could at most remove.
"""

from __future__ import annotations

import cProfile
import gzip
import pstats
import shutil
import sys
import tempfile
import timeit
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pandas as pd

from profiling.analysis.summary import forward_work, per_forward
from profiling.gantt.spec import gantt_spec
from profiling.kernels.names import kernel_table
from profiling.trace import model as trace_model

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ("sdpa_flash_8_16_1024_64_bf16", "h200_kernels-local-triton_8_16_1024_64_bf16")


def best_us(fn) -> float:
    return min(timeit.repeat(fn, number=300, repeat=5)) / 300 * 1e6


def stored_trace(name: str) -> Path:
    """A fixture trace gunzipped to a temp file: the plain .json a run parses."""
    path = Path(tempfile.mkdtemp()) / "trace.json"
    source = ROOT / "tests" / "fixtures" / f"{name}.json.gz"
    with gzip.open(source) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def steps(name: str) -> list[Callable[[], object]]:
    """Each post-processing step on one stored trace, as a call."""
    path = stored_trace(name)
    trace = trace_model.load(path)
    windows, work = forward_work(trace)
    return [
        lambda: trace_model.load(path),
        lambda: forward_work(trace),
        lambda: per_forward(trace, windows=windows, work=work),
        lambda: kernel_table(work, per=max(len(windows), 1)),
        lambda: gantt_spec(trace.spans, trace.lanes, title="x").to_json(),
    ]


def shares(step: Callable[[], object], calls: int = 200) -> dict[str, float]:
    """Fraction of the step's profiled time spent in pandas, numpy, our code and the rest."""
    for _ in range(20):
        step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        step()
    profiler.disable()
    spent = dict.fromkeys(("pandas", "numpy", "profiling", "other"), 0.0)
    for (file, _, function), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        where = file if file != "~" else function  # C functions: "<method 'x' of 'numpy...'>"
        key = next((k for k in ("pandas", "numpy", "profiling") if k in where), "other")
        spent[key] += row[2]  # own time, not counting callees
    total = sum(spent.values()) or 1.0
    return {k: v / total for k, v in spent.items()}


def main() -> None:
    try:
        import pyarrow

        arrow = f"pyarrow {pyarrow.__version__}"
    except ImportError:
        arrow = "no pyarrow"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        storage = pd.options.mode.string_storage
    print(f"pandas {pd.__version__}, {arrow}, string storage {storage}")
    names = [f"void kernel_{i}<float, 128>(...)" for i in range(12)]
    print("| 3-column frame from | µs |")
    print("|---|---|")
    builds = {
        "lists of str": lambda: pd.DataFrame(dict.fromkeys("abc", names)),
        "object arrays": lambda: pd.DataFrame({k: np.array(names, dtype=object) for k in "abc"}),
        "float arrays": lambda: pd.DataFrame({k: np.arange(12.0) for k in "abc"}),
    }
    for label, build in builds.items():
        print(f"| {label} | {best_us(build):.0f} |")
    labels = ("load", "forward attribution", "per-forward", "kernel table", "Gantt + JSON", "sum")
    print(f"\n| trace | {' | '.join(labels)} |")
    print("|---|---|---|---|---|---|---|")
    for name in FIXTURES:
        cost = [best_us(step) for step in steps(name)]
        cells = " | ".join(f"{c:.0f}" for c in cost)
        print(f"| {name} | {cells} | {sum(cost):.0f} |")
    name = FIXTURES[-1]
    print(f"\n{name}, share of each step's time under cProfile (own time by package)")
    print("| step | pandas | numpy | profiling/ | other (Python, msgspec, orjson) |")
    print("|---|---|---|---|---|")
    for label, step in zip(labels[:-1], steps(name), strict=True):
        cut = shares(step)
        print(f"| {label} | " + " | ".join(f"{cut[k]:.0%}" for k in cut) + " |")


if __name__ == "__main__":
    main()
