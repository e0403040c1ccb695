"""What the app's post-processing costs on its own, in a tight loop (issue #7 overhead).

    python benchmarks/parse_floor.py          # on the H200 host, and on this machine

click_stages.py times these steps inside a run, right after the profiler and the GPU work.
Here the same steps (trace load, forward attribution, per-forward figures, kernel table,
Gantt + JSON) repeat back to back on stored H200 traces: the least they cost on a host. Also
timed: building a small pandas frame from lists of strings, from object arrays and from
floats (pandas 3 infers its `str` dtype either way; with pyarrow installed it stores them
there), to see whether typed input would make the tables cheaper. Best of 5 × 300, in µs.
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
import timeit
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pandas as pd

from profiling import trace as trace_model
from profiling.gantt import gantt_spec
from profiling.kernels import kernel_table
from profiling.summary import forward_work, per_forward

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ("sdpa_flash_8_16_1024_64_bf16", "h200_kernels-local-triton_8_16_1024_64_bf16")


def best_us(fn) -> float:
    return min(timeit.repeat(fn, number=300, repeat=5)) / 300 * 1e6


def steps_us(name: str) -> list[float]:
    """Each post-processing step on one stored trace."""
    path = Path(tempfile.mkdtemp()) / "trace.json"
    source = ROOT / "tests" / "fixtures" / f"{name}.json.gz"
    with gzip.open(source) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace = trace_model.load(path)
    windows, work = forward_work(trace)
    steps = [
        lambda: trace_model.load(path),
        lambda: forward_work(trace),
        lambda: per_forward(trace, windows=windows, work=work),
        lambda: kernel_table(work, per=max(len(windows), 1)),
        lambda: gantt_spec(trace.spans, trace.lanes, title="x").to_json(),
    ]
    return [best_us(step) for step in steps]


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
    steps = ("load", "forward attribution", "per-forward", "kernel table", "Gantt + JSON", "sum")
    print(f"\n| trace | {' | '.join(steps)} |")
    print("|---|---|---|---|---|---|---|")
    for name in FIXTURES:
        cost = steps_us(name)
        cells = " | ".join(f"{c:.0f}" for c in cost)
        print(f"| {name} | {cells} | {sum(cost):.0f} |")


if __name__ == "__main__":
    main()
