"""A Profile click's trace work, read once (issue 18) against the two reads it replaced.

    python benchmarks/read_once.py --repeats 200

Before issue 18 a click read its run's trace twice: the run read it as records
(small_trace: per-forward figures, kernel table), then views.page parsed the file again with
trace.load for the launch statistics, and drew the Gantt from the records. Now the run reads it
once (run_trace.read) and the page computes the launch statistics from the records' columns.
Both sequences are timed here in one process, alternating, on the trace of a live CPU run
(naive, the CPU default's small shape) and on the H200 fixtures; medians in ms. Then whole
clicks (runner.run + views_profile.page + the figure's JSON), alternating in one process:
"two reads" is the same click with the page's launch statistics taken from a second trace.load,
as before.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.analysis.launch import launch_stats
from profiling.run import gantt_records
from profiling.run import records as small_trace
from profiling.run import trace as run_trace
from profiling.trace import model as trace_model

if TYPE_CHECKING:
    from profiling.workload.spec import Workload

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def two_reads(path: Path) -> None:
    """The click before: records in the run, the table again for the page's launch block."""
    records = small_trace.read(path)
    assert records is not None
    run_trace.of_records(records)  # the run's per-forward figures and kernel table
    table = trace_model.load(path)
    launch_stats(trace_model.Trace(spans=table.spans, t0_us=0.0, lanes=table.lanes))
    gantt_records.gantt(records, "x")


def one_read(path: Path) -> None:
    """The click now: one read, everything from it."""
    trace = run_trace.read(path)
    trace.launch_stats()
    trace.gantt("x")


def alternate(path: Path, repeats: int) -> dict[str, float]:
    steps: dict[str, Callable[[Path], None]] = {"two reads": two_reads, "one read": one_read}
    for step in steps.values():
        step(path)  # warm: imports, caches
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            began = time.perf_counter()
            step(path)
            times[name].append((time.perf_counter() - began) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def cpu_workload() -> Workload:
    """The CPU default's small shape; imported late: the trace-only table needs no torch."""
    from profiling.workload.spec import Workload

    return Workload.from_user(variant="naive", device="cpu", batch=1, heads=2, seq_len=128,
                              head_dim=32, dtype="float32")  # fmt: skip


def cpu_run_trace() -> Path:
    from profiling.run.runner import run

    return run(cpu_workload(), out_dir=tempfile.mkdtemp(prefix="read-once-")).trace_json


def click(second_read: bool) -> float:
    """One Profile click's computation in ms; with `second_read`, as before issue 18."""
    from profiling.run.runner import run
    from profiling.views import profile as views_profile

    began = time.perf_counter()
    result = run(cpu_workload(), out_dir=tempfile.mkdtemp(prefix="read-once-"))
    if second_read:  # the page's launch block from the table, parsed again from the file
        result.trace.launch_stats = lambda: launch_stats(trace_model.load(result.trace_json))
    views_profile.page(result).figure.to_json()
    return (time.perf_counter() - began) * 1e3


def clicks(repeats: int) -> None:
    for _ in range(3):
        click(True), click(False)
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(repeats):
        for second_read in (True, False) if i % 2 else (False, True):  # each goes first by turns
            times[second_read].append(click(second_read))
    print("\n| whole click (naive, B1 H2 S128 D32, CPU) | median ms | min ms |")
    print("|---|---|---|")
    for second_read, values in sorted(times.items(), reverse=True):
        name = "two reads (before)" if second_read else "one read (now)"
        print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} |")
    # each pair ran back to back: the median of their differences cancels the host's drift
    saved = [before - now for before, now in zip(times[True], times[False], strict=True)]
    print(f"| saved per click, median of the {repeats} pairs | {statistics.median(saved):.1f} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--clicks", type=int, default=40)
    args = parser.parse_args()
    paths = [cpu_run_trace(), *sorted(FIXTURES.glob("*.json.gz"))]
    print("| trace | spans | two reads (ms) | one read (ms) | ratio |")
    print("|---|---|---|---|---|")
    for path in paths:
        medians = alternate(path, args.repeats)
        spans = len(trace_model.load(path).spans)
        before, after = medians["two reads"], medians["one read"]
        name = "live CPU run (naive, B1 H2 S128 D32)" if path.suffix == ".json" else path.name
        print(f"| {name} | {spans} | {before:.2f} | {after:.2f} | {after / before:.2f} |")
    clicks(args.clicks)


if __name__ == "__main__":
    main()
