"""Issue 42's speed bound on traces of many shapes: each shape of gen_trace_independent.SHAPES
written at `--events` and read by `python -m profiling analyze` under `/usr/bin/time -v`.

    python -m benchmarks.speed_variants --events 10000000 --folder /tmp/variants [--shapes all]

Prints one Markdown row per run: wall and CPU seconds, peak RSS, and the load average before
and after (on a shared machine the wall time follows the load; CPU seconds much less so).
A trace already in the folder is reused: its name says its shape and size.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.gen_trace_independent import SHAPES, write

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {
    "wall": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)",
    "user": r"User time \(seconds\): (\S+)",
    "sys": r"System time \(seconds\): (\S+)",
    "rss_kb": r"Maximum resident set size \(kbytes\): (\d+)",
}


def seconds(clock: str) -> float:
    """'1:02.5' or '0:17.27' → seconds."""
    total = 0.0
    for part in clock.split(":"):
        total = total * 60 + float(part)
    return total


def load_average() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def measure(trace: Path) -> dict[str, float | str]:
    """One `analyze` of `trace`: wall s, CPU s, peak GB, load average before → after."""
    before = load_average()
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "profiling", "analyze", str(trace)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"analyze failed on {trace}: {done.stderr[-2000:]}")
    found = {key: re.search(pattern, done.stderr) for key, pattern in FIELDS.items()}
    values = {key: match.group(1) for key, match in found.items() if match}
    return {
        "wall": seconds(values["wall"]),
        "cpu": float(values["user"]) + float(values["sys"]),
        "gb": int(values["rss_kb"]) * 1024 / 1e9,
        "load": f"{before} → {load_average()}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated SHAPES")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    print("| shape | events | gzip MB | wall s | CPU s | peak GB | load average |")
    print("|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        trace = args.folder / f"{shape}_{args.events}.json.gz"
        if not trace.exists():
            written = write(args.events, trace, shape=SHAPES[shape])
            (args.folder / f"{trace.name}.events").write_text(str(written))
        events = (args.folder / f"{trace.name}.events").read_text()
        for _ in range(args.repeat):
            got = measure(trace)
            print(f"| {shape} | {int(events):,} | {trace.stat().st_size / 1e6:.0f} | "
                  f"{got['wall']:.1f} | {got['cpu']:.1f} | {got['gb']:.2f} | {got['load']} |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
