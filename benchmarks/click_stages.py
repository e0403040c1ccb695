"""Where one warm Profile run's time goes, stage by stage, next to the bare script (issue #7).

    python benchmarks/click_stages.py --variant sdpa-flash kernels-flash-attn2 naive

overhead.py times the whole run against the bare loop; this script replays the runner's own
steps (its private functions, in the order `_attempt` and `_result` call them) with a clock
between each, so the table says which step the app's extra milliseconds come from. The
reference check is timed twice: queuing its launches, and the wait for its result after the
parse (the GPU work not hidden behind the CPU's). Diagnostics after the table, outside the
sum: new allocator segments (cudaMalloc calls) the reference made, and the same reference
queued and awaited once more straight after. Medians over `--repeats` warm runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks.overhead import TINY, bare
from profiling.run import export as run_export
from profiling.run import runner
from profiling.run import trace as run_trace
from profiling.run.reference import check as reference_check
from profiling.workload.memory import check_memory
from profiling.workload.spec import Workload, resolve_device


def stages(config: Workload, device: str, out: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        times[name] = (now - clock[0]) * 1e3
        clock[0] = now

    config = config.validated()
    variant = config.spec
    variant.unavailable(device, config.torch_dtype)
    lap("validate")
    spare = check_memory(config, device)
    lap("memory check")
    problem = config.problem(device)
    tensors = runner._inputs(config, device, variant.layout)
    built = variant.build(problem)
    lap("inputs + build")
    prof = runner._profile(config, built, variant, tensors, device, lambda f, t: None)
    lap("warm-up + profile")
    paths = run_export.export(prof, config, device, out)
    lap("export json + txt (gz on its thread)")
    segments = _segments(device)
    reference = reference_check.relative_error(tensors, config, variant.layout, device, spare)
    lap("reference: queue")
    times["reference: new segments"] = _segments(device) - segments
    clock[0] = time.perf_counter()  # the allocator read above is not the parse's
    trace = run_trace.read(paths.json)
    lap("trace read: figures + kernel table")
    if trace.reader != run_trace.RECORDS:
        raise SystemExit(f"{config.variant}: the run's trace took the vectorised path")
    run_export.operator_table(prof, device)
    lap("operator table")
    reference()
    lap("reference: wait")
    paths.gz_written.result()
    lap("gz: wait")
    trace.launch_stats()
    lap("launch statistics (the page's)")
    trace.gantt("x").to_json()
    lap("Gantt + JSON")
    again = reference_check.relative_error(tensors, config, variant.layout, device, spare)
    lap("(reference again: queue)")
    again()
    lap("(reference again: wait)")
    return times


def _segments(device: str) -> int:
    """cudaMalloc calls so far (the allocator's segment count): a new one costs a driver call."""
    if device != "cuda":
        return 0
    return int(torch.cuda.memory_stats().get("segment.all.allocated", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", nargs="+", default=["sdpa-flash", "kernels-flash-attn2"])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    device = resolve_device("auto")
    out = Path(tempfile.mkdtemp(prefix="stages-"))
    for name in args.variant:
        # on a CPU a quick check at overhead.py's tiny shape; the numbers come from the H200
        config = Workload.from_user(
            variant=name, device=device, **(TINY if device == "cpu" else {})
        )
        for _ in range(2):
            stages(config, device, out), bare(config, device, out)
        runs: dict[str, list[float]] = defaultdict(list)
        bares = []
        for _ in range(args.repeats):
            for key, value in stages(config, device, out).items():
                runs[key].append(value)
            bares.append(bare(config, device, out) * 1e3)
        where = torch.cuda.get_device_name() if device == "cuda" else device
        print(f"\n{name} at {config.shape_text()} on {where}")
        print("| stage | median ms |")
        print("|---|---|")
        total = 0.0
        extra = {}
        for key, values in runs.items():
            med = statistics.median(values)
            if key.startswith(("(", "reference: new")):  # diagnostics, not part of a run
                extra[key] = med
                continue
            total += med
            print(f"| {key} | {med:.2f} |")
        print(f"| **sum of medians** | **{total:.2f}** |")
        print(f"| bare loop (overhead.bare) | {statistics.median(bares):.2f} |")
        for key, med in extra.items():
            print(f"| {key} | {med:.2f} |")


if __name__ == "__main__":
    main()
