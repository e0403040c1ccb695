"""Cross-check profiling/analysis/launch.py against HTA's TraceAnalysis on the same traces.

    pip install HolisticTraceAnalysis psutil     # dev only (requirements-dev.txt)
    python benchmarks/hta_crosscheck.py [TRACE.json[.gz] ...] [--markdown] [--rounding]

With no trace given it checks the three H200 fixtures. It prints, per trace, our GPU busy/idle
figures next to HTA's `get_temporal_breakdown()` and our per-launch figures next to HTA's
`get_cuda_kernel_launch_stats()`, joined on the correlation id.

How HTA is set up so both measure the same thing:
- `include_last_profiler_step=True`: by default HTA drops GPU work launched in the last
  ProfilerStep; we count all active steps.
- `HTA_DISABLE_NS_ROUNDING=1` (unless --rounding): by default HTA rounds every event inward to
  whole microseconds (start up, end down; pytorch#122425), which moves each gap by up to 2 µs.
  With rounding off the two agree to float precision. With it on, each interval shrinks by up to
  2 µs (naive: idle 50.0 vs 28.8 µs), and a sub-µs event (cuDNN's 0.77 µs memset) gets a
  negative duration, which trips HTA's own `assert non_compute_time >= 0`.
- HTA's launch table knows only cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync and
  cudaMemsetAsync. Driver-API launches — cuLaunchKernel (Triton kernels) and cuLaunchKernelEx
  (cuBLAS nvjet GEMMs, cuDNN's attention on Hopper) — are missing from HTA's table; ours counts
  them. The comparison joins on the correlation ids HTA has and lists the extra ones separately.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profiling.analysis.launch import launch_stats  # noqa: E402
from profiling.text_tables import markdown, text_table  # noqa: E402
from profiling.trace.model import load  # noqa: E402

FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.json.gz"))
HTA_LAUNCH_APIS = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}


@dataclass
class Check:
    trace: str
    temporal: pd.DataFrame  # metric, ours, hta, diff
    launches: pd.DataFrame  # per correlation id HTA knows: ours vs hta
    extra: pd.DataFrame  # launches we count that HTA's table does not have

    @property
    def max_temporal_diff_us(self) -> float:
        us = self.temporal[self.temporal["metric"].str.endswith("µs")]
        return float(us["diff"].abs().max())

    @property
    def max_launch_diff_us(self) -> float:
        cols = ["Δ cpu_launch_us", "Δ gpu_us", "Δ launch_delay_us"]
        return float(self.launches[cols].abs().to_numpy().max()) if len(self.launches) else 0.0


def hta_analysis(path: Path, rounding: bool = False):
    """HTA's TraceAnalysis over a temp folder holding only this trace (HTA reads a folder)."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "0" if rounding else "1"
    logging.getLogger("hta").setLevel(logging.ERROR)
    from hta.trace_analysis import TraceAnalysis

    folder = Path(tempfile.mkdtemp(prefix="hta-"))
    suffix = ".json.gz" if path.name.endswith(".gz") else ".json"
    shutil.copyfile(path, folder / f"rank-0{suffix}")  # no rank in a torch trace: HTA uses 0
    try:
        return TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check(path: Path, rounding: bool = False) -> Check:
    ours = launch_stats(load(path))
    analysis = hta_analysis(path, rounding)
    t = analysis.get_temporal_breakdown(visualize=False).iloc[0]
    hta_launch = analysis.get_cuda_kernel_launch_stats(visualize=False)[0]
    compute = float(t["compute_time(us)"])
    temporal = pd.DataFrame(
        [
            ("window µs", ours.window_us, float(t["kernel_time(us)"])),
            ("idle µs", ours.idle_us, float(t["idle_time(us)"])),
            ("compute µs", ours.compute_us, compute),
            ("memory µs", ours.busy_us - ours.compute_us, float(t["non_compute_time(us)"])),
            ("idle %", ours.idle_pct, float(t["idle_time_pctg"])),
            ("busy %", ours.busy_pct, 100.0 - float(t["idle_time_pctg"])),
        ],
        columns=["metric", "ours", "hta"],
    )
    temporal["diff"] = temporal["ours"] - temporal["hta"]
    mine = ours.per_launch.set_index("correlation")
    theirs = hta_launch.set_index("correlation")
    joined = mine.join(theirs, how="inner")
    launches = pd.DataFrame(
        {
            "kernel": joined["kernel"],
            "launch_api": joined["launch_api"],
            "cpu_launch_us": joined["cpu_launch_us"],
            "hta cpu_duration": joined["cpu_duration"],
            "Δ cpu_launch_us": joined["cpu_launch_us"] - joined["cpu_duration"],
            "Δ gpu_us": joined["gpu_us"] - joined["gpu_duration"],
            "launch_delay_us": joined["launch_delay_us"],
            "hta launch_delay": joined["launch_delay"],
            "Δ launch_delay_us": joined["launch_delay_us"] - joined["launch_delay"],
        }
    ).reset_index()
    missing = theirs.index.difference(mine.index)
    if len(missing):
        raise AssertionError(f"HTA has launches we do not: correlation ids {list(missing)}")
    extra = mine.loc[mine.index.difference(theirs.index), ["kernel", "launch_api"]].reset_index()
    return Check(path.name, temporal, launches, extra)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="*", type=Path, default=FIXTURES)
    p.add_argument("--markdown", action="store_true", help="print Markdown tables (for docs)")
    p.add_argument("--rounding", action="store_true", help="keep HTA's default µs rounding")
    args = p.parse_args(argv)
    show = markdown if args.markdown else text_table
    for path in args.traces:
        try:
            c = check(path, args.rounding)
        except AssertionError as exc:  # HTA's own consistency asserts (see --rounding above)
            print(f"\n### {path.name}\n\nHTA failed: AssertionError {exc}".rstrip())
            continue
        print(f"\n### {c.trace}\n")
        print("GPU time (ours: profiling.analysis.launch; HTA: get_temporal_breakdown)\n")
        print(show(c.temporal.assign(diff=c.temporal["diff"].map(lambda d: f"{d:+.2e}"))))
        summary = (
            c.launches.groupby(["kernel", "launch_api"], sort=False)
            .agg(
                n=("kernel", "size"),
                cpu_launch_us=("cpu_launch_us", "mean"),
                hta_cpu_duration=("hta cpu_duration", "mean"),
                launch_delay_us=("launch_delay_us", "mean"),
                hta_launch_delay=("hta launch_delay", "mean"),
            )
            .reset_index()
        )
        print("\nlaunches HTA also counts, means per kernel (get_cuda_kernel_launch_stats)\n")
        print(show(summary))
        print(
            f"\nlargest difference: GPU time {c.max_temporal_diff_us:.2e} µs, "
            f"per launch {c.max_launch_diff_us:.2e} µs over {len(c.launches)} launches"
        )
        if len(c.extra):
            kinds = c.extra.groupby(["kernel", "launch_api"]).size().reset_index(name="n")
            n = len(c.extra)
            print(f"\nlaunches only we count ({n}; HTA's table omits driver-API launches)\n")
            print(show(kinds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
