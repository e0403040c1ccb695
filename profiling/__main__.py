"""Command line: profile one variant (or all) like the post's scripts, no UI.

python -m profiling --variant sdpa-flash --seq-len 1024 --dtype bfloat16 --out traces
python -m profiling compare|diff|sweep|analyze ...   (see `python -m profiling compare -h`)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from profiling.cli.commands import views_main
from profiling.cli.flags import (
    SUBCOMMANDS,
    Parser,
    add_shape_flags,
    check_out,
    said_kept,
    shape_of,
    store_of,
)
from profiling.user_values import ConfigError

if TYPE_CHECKING:
    from profiling.run.runner import ProfileResult

# attention/, the runner and the workload import torch (seconds): only a profile run needs
# them, so `analyze` and `diff` import them never and the rest only once they are parsed

ALIASES = {"analyse": "analyze"}  # the tab is called Analyse


def parser() -> argparse.ArgumentParser:
    from attention import VARIANTS

    commands = "\n".join(f"  {name:9s} {text}" for name, text in SUBCOMMANDS.items())
    profile_parser = Parser(
        prog="python -m profiling",
        description=__doc__.splitlines()[0],
        epilog=f"commands (python -m profiling COMMAND -h for their flags):\n{commands}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    variants = f"one of: {', '.join(VARIANTS)}, or all"
    profile_parser.add_argument("--variant", required=True, help=variants)
    add_shape_flags(profile_parser, seq_len=True, counters=True)
    out = "folder for <variant>/<tag>.json.gz and .txt"
    profile_parser.add_argument("--out", default="traces", help=out)
    return profile_parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv:
        argv[0] = ALIASES.get(argv[0], argv[0])
    if argv and argv[0] in SUBCOMMANDS:
        return views_main(argv)
    if argv and not argv[0].startswith("-"):  # a typo'd command would read as a missing --variant
        known = ", ".join(SUBCOMMANDS)
        print(f"error: unknown command '{argv[0]}'; choose from: {known}", file=sys.stderr)
        return 2
    args = parser().parse_args(argv)
    from attention import VARIANTS
    from profiling.run.runner import RunError, VariantUnavailable, quiet_profiler_logs, run
    from profiling.store.hooks import keep, profile_run
    from profiling.workload.spec import Workload, resolve_device

    quiet_profiler_logs(args.verbose)
    names = list(VARIANTS) if args.variant == "all" else [args.variant]
    try:
        workloads = [Workload.from_user(variant=name, **shape_of(args)) for name in names]
        device = resolve_device(args.device)
        check_out(args.out)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failures = 0
    overview: list[str] = []
    for workload in workloads:
        out = Path(args.out) / workload.variant
        try:
            result = run(workload, out_dir=out)
        except (VariantUnavailable, ConfigError, RunError) as exc:
            if len(workloads) == 1:  # the run asked for did not happen: an error, as for bad flags
                print(f"error: {_named(workload.variant, exc)}", file=sys.stderr)
                return 2 if isinstance(exc, ConfigError) else 1
            reason = _reason(workload.variant, exc)
            if isinstance(exc, VariantUnavailable):  # expected with `all`: not a failure
                overview.append(f"{workload.variant:22s} unavailable: {reason}")
                print(f"{workload.variant}: unavailable — {reason}\n")
            else:
                status = "refused" if isinstance(exc, ConfigError) else "failed"
                overview.append(f"{workload.variant:22s} {status}: {reason}")
                print(f"{_named(workload.variant, exc)}\n", file=sys.stderr)
                failures += 1
            continue
        overview.append(_printed(result))
        said_kept(keep([profile_run(result, "cli")], store_of(args)))
    if len(workloads) > 1:
        print(f"== {len(workloads)} variants on {device} ==")
        print("\n".join(overview))
    return 1 if failures else 0


def _printed(result: ProfileResult) -> str:
    """Print a finished run (summary, files, operator table); its line of the overview."""
    from profiling.views import profile as views_profile
    from profiling.views.text.summary import summary_rows

    result.trace_json.unlink(missing_ok=True)  # keep what the post keeps: .json.gz and .txt
    summary = result.summary
    rows = summary_rows(summary)
    width = max(len(name) for name, _ in rows)
    print("\n".join(f"{name:>{width}}  {value}" for name, value in rows))
    print(f"{'trace':>{width}}  {result.trace_gz}\n{'table':>{width}}  {result.table_txt}")
    for name, path in (("figures", result.run_json), ("memory", result.memory_snapshot)):
        if path is not None:  # the memory snapshot: GPU runs only (pytorch.org/memory_viz)
            print(f"{name:>{width}}  {path}")
    print()
    print(result.table_txt.read_text())
    print(views_profile.why_text(result))
    if result.counters is not None:  # issue 36: --counters
        from profiling.views import counters as views_counters

        print(views_counters.counters_text(result))
    gpu_us, kernels_per_forward = summary.gpu_us_per_forward, summary.kernels_per_forward
    gpu = f"{gpu_us:9.1f}" if gpu_us is not None else "      n/a"  # None: a CPU run has none
    kernels = f"{kernels_per_forward:5.2f}" if kernels_per_forward is not None else "  n/a"
    return (
        f"{summary.variant:22s} kernels/fwd {kernels}  GPU µs {gpu}  "
        f"CPU µs {summary.cpu_us_per_forward:9.1f}  rel.err {summary.rel_err:.1e}  "
        f"ran: {summary.ran}"
    )


def _named(variant: str, exc: Exception) -> str:
    """The error naming the variant once: most runner messages already start with its id."""
    text = str(exc)
    return text if text.startswith(f"{variant} ") else f"{variant}: {text}"


def _reason(variant: str, exc: Exception) -> str:
    """The error without its leading variant id (and the runner's "failed on cpu: "), for a
    line that names the variant and its status itself."""
    text = str(exc)
    lead = re.match(rf"{re.escape(variant)} (is unavailable here: |failed on \w+: )?", text)
    return text[lead.end() :] if lead else text


def _entry() -> int:
    """main() for a shell: when a reader such as `head` closes the pipe early, stop quietly with
    exit 1 (the Python docs' recipe), not a BrokenPipeError traceback."""
    try:
        code = main()
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit does not fail again
        return 1


if __name__ == "__main__":
    raise SystemExit(_entry())
