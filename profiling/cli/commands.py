"""`python -m profiling compare | diff | sweep | analyze`: the page's four other tabs as
commands, printing their tables (aligned text, or Markdown with --markdown)."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from profiling.cli.flags import (
    SUBCOMMANDS,
    Parser,
    add_ray_flag,
    add_shape_flags,
    at_least_one,
    check_out,
    job_progress,
    lengths,
    printed_table,
    progress_bar,
    said_kept,
    shape_of,
    store_of,
    variant_names,
)
from profiling.text_tables import printable, shape_text
from profiling.trace.events import TraceError, TraceTooBig
from profiling.trace.model import Trace
from profiling.trace.model import load as load_trace
from profiling.user_values import ConfigError

if TYPE_CHECKING:
    import pandas as pd

MARKDOWN_HELP = "print Markdown tables"
# the Compare table's columns a terminal shows (the zip's glance.csv has them all)
COMPARE_COLUMNS = [
    "variant", "kernels/fwd", "GPU µs/fwd", "CPU µs/fwd", "bound", "peak MiB", "TFLOP/s",
    "% of peak", "rel. err", "ran", "dominant kernel", "GPU busy %", "launch delay µs",
    "CPU launch µs/fwd",
]  # fmt: skip
KERNEL_COLUMNS = ["kernel", "category", "count", "total_us", "mean_us", "pct_gpu", "decoded"]


def without_empty_columns(table: pd.DataFrame) -> pd.DataFrame:
    """The columns with at least one value (not empty, not "n/a"): a CPU run's GPU figures do
    not exist, and the page leaves those columns out too (issue 42: eight empty columns in a
    CPU compare). A table with no rows keeps its header."""
    if table.empty:
        return table
    text = table.astype(object).where(table.notna(), "").astype(str)
    empty = text.apply(lambda column: column.str.strip().str.match(r"^(?:n/a\b.*)?$"))
    return table.loc[:, ~empty.all()]


def views_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m profiling", description="Compare, diff, sweep or analyse traces."
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    _compare_flags(commands.add_parser("compare", help=SUBCOMMANDS["compare"]))
    _diff_flags(commands.add_parser("diff", help=SUBCOMMANDS["diff"]))
    _sweep_flags(commands.add_parser("sweep", help=SUBCOMMANDS["sweep"]))
    _analyze_flags(commands.add_parser("analyze", help=SUBCOMMANDS["analyze"]))
    return parser


def _compare_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variants",
        type=variant_names,
        default=None,
        help="comma-separated ids (default: the post's six + kernels variants here)",
    )
    _job_flags(parser, "compare")


def _job_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags after a job's variants: the shape (a Sweep's lengths are its own), --out,
    --ray and --markdown (a Compare may ask for counters, a Sweep not)."""
    add_shape_flags(parser, seq_len=command != "sweep", counters=command == "compare")
    where = f"traces/{command}"
    parser.add_argument("--out", default=where, help="folder for traces and the zip")
    add_ray_flag(parser)
    parser.add_argument("--markdown", action="store_true", help=MARKDOWN_HELP)


def _diff_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace_a", metavar="A.json[.gz]")
    parser.add_argument("trace_b", metavar="B.json[.gz]")
    parser.add_argument("--label-a", default=None, help="name of A in the tables (default: A)")
    parser.add_argument("--label-b", default=None, help="name of B in the tables (default: B)")
    totals = "totals over the windows, not per window"
    parser.add_argument("--totals", action="store_true", help=totals)
    parser.add_argument("--top", type=at_least_one, default=25, help="rows to print per table")
    parser.add_argument("--markdown", action="store_true", help=MARKDOWN_HELP)


def _sweep_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variants", type=variant_names, required=True, help="comma-separated ids")
    parser.add_argument(
        "--seq-lens",
        type=lengths,
        default=None,
        help="comma-separated lengths (default: 256 doubling to 16384, capped by the memory "
        "estimate)",
    )
    _job_flags(parser, "sweep")


def _analyze_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", metavar="TRACE.json[.gz]")
    parser.add_argument("--top", type=at_least_one, default=20, help="rows to print per table")
    parser.add_argument(
        "--max-mib",
        type=at_least_one,
        default=None,
        help="limit on the file and on its JSON once gunzipped (default: none; the trace is "
        "read as a stream, so any size the machine's memory allows)",
    )
    parser.add_argument("--markdown", action="store_true", help=MARKDOWN_HELP)


def views_main(argv: list[str]) -> int:
    if argv[0] == "model":
        from profiling.cli.model import model_main

        return model_main(argv[1:])
    if argv[0] == "history":
        from profiling.cli.history import history_main

        return history_main(argv[1:])
    args = views_parser().parse_args(argv)
    try:
        if args.command in ("compare", "sweep"):
            check_out(args.out)
            from profiling.run.runner import quiet_profiler_logs  # torch: only for runs

            quiet_profiler_logs(args.verbose)
        return COMMANDS[args.command](args)
    except (ConfigError, TraceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def compare_command(args: argparse.Namespace) -> int:
    from profiling.analysis.role_views import role_matrix
    from profiling.jobs.compare import compare
    from profiling.jobs.executor import executor_for
    from profiling.store.hooks import compare_runs, keep
    from profiling.views.compare import sdpa_lines

    on = executor_for(args.ray)
    with job_progress(args.ray) as progress:
        result = compare(
            args.variants, out_dir=args.out, progress=progress, executor=on, **shape_of(args)
        )
    said_kept(keep(compare_runs(result, "cli"), store_of(args)))
    print(f"== compare on {result.device_name} · {shape_text(result.shape)} ==")
    ran = result.glance[result.glance["status"] == "ok"]
    print(printed_table(without_empty_columns(ran[COMPARE_COLUMNS]), args.markdown))
    missing = result.unavailable()
    if not missing.empty:
        print("\nnot run:")
        print("\n".join(f"  {r.variant} ({r.status}): {r.reason}" for r in missing.itertuples()))
    roles = role_matrix((r.variant, r.roles) for r in result.ran)
    if len(roles.columns) > 1:  # a role column: some variant ran GPU kernels
        print("\n== kernels by role in attention (µs per step) ==")
        print(printed_table(roles.round(1), args.markdown))
    print("\n" + "\n".join([*result.notes, *sdpa_lines(result)]))
    if result.zip_path:
        print(f"zip: {keep_zip(result.zip_path, Path(args.out))}")
    return 0 if result.ran else 1


def diff_command(args: argparse.Namespace) -> int:
    from profiling.analysis.diff import diff, labelled
    from profiling.analysis.role_views import role_diff, role_diff_view, role_lines
    from profiling.views.diff import diff_headline  # the page's headline, as plain text

    label_a, label_b = args.label_a or "A", args.label_b or "B"
    for flag, label in (("--label-a", label_a), ("--label-b", label_b)):
        if not label.isprintable():  # a newline would split a table row
            raise ConfigError(f"{flag} must be one line of printable text")
    if label_a == label_b:
        raise ConfigError(
            f"--label-a and --label-b must differ (both are {label_a!r}): columns are named "
            "after them"
        )
    trace_a, trace_b = load(args.trace_a), load(args.trace_b)
    kernels, operators = diff(trace_a, trace_b, label_a, label_b, per_forward=not args.totals)
    (scope_a, scope_b), (unit_a, unit_b) = kernels.attrs["scopes"], kernels.attrs["units"]
    print(f"{label_a} = {args.trace_a} ({scope_a}, {unit_a})")
    print(f"{label_b} = {args.trace_b} ({scope_b}, {unit_b})")
    if unit_a != unit_b:
        print("warning: the two are counted over different windows; profile both the same way")
    print(diff_headline(kernels, operators))
    print(
        f"deltas are {label_b} − {label_a}; calls added, removed or made a different number of "
        "times first (change: count), then changes in time beyond the row's spread (time), "
        "then those within it (noise)"
    )
    print("\n== kernels ==")
    print(printed_table(labelled(kernels.drop(columns="name")).head(args.top), args.markdown))
    print("\n== operators ==")
    print(printed_table(labelled(operators).head(args.top), args.markdown))
    roles = role_diff(trace_a, trace_b)
    if not roles.empty:
        print("\n== by role in attention ==")
        print("\n".join(role_lines(roles, (label_a, label_b), (f" {unit_a}", f" {unit_b}"))))
        print(printed_table(role_diff_view(roles, label_a, label_b).head(args.top), args.markdown))
    return 0


def sweep_command(args: argparse.Namespace) -> int:
    from profiling.jobs.executor import executor_for
    from profiling.jobs.sweep import sweep
    from profiling.store.hooks import keep, sweep_runs

    on = executor_for(args.ray)
    with job_progress(args.ray) as progress:
        result = sweep(
            args.variants,
            args.seq_lens,
            out_dir=args.out,
            progress=progress,
            executor=on,
            **shape_of(args),
        )
    said_kept(keep(sweep_runs(result, "cli"), store_of(args)))
    print(f"== sweep on {result.device_name} · {shape_text(result.shape)} ==")
    print(printed_table(result.table, args.markdown))
    print("\n" + "\n".join(result.notes))
    if result.zip_path:
        print(f"zip: {keep_zip(result.zip_path, Path(args.out))}")
    return 0 if (result.table["status"] == "ok").any() else 1


def analyze_command(args: argparse.Namespace) -> int:
    from profiling.analysis.analyze import analyze, bytes_text
    from profiling.views.shared import role_view, roofline_view

    limit = args.max_mib * 1024**2 if args.max_mib is not None else NO_LIMIT
    size = regular_file_size(args.trace)
    if size is not None and size > limit:
        raise file_error(
            args.trace,
            f"the file is {bytes_text(size)}; the limit is --max-mib {args.max_mib} MiB (raise it)",
        )
    try:
        with progress_bar(Path(args.trace).name) as progress:
            result = analyze(
                args.trace, max_upload_bytes=limit, max_expanded_bytes=limit, progress=progress
            )
    except TraceTooBig as exc:
        raise file_error(args.trace, f"{exc}; or raise --max-mib ({args.max_mib})") from None
    except TraceError as exc:
        raise file_error(args.trace, str(exc)) from None
    width = max(len(name) for name, _ in result.summary)
    print("\n".join(f"{name:>{width}}  {printable(value)}" for name, value in result.summary))
    print(f"\n== operators and record_function spans (whole trace; top {args.top}) ==")
    print(printed_table(result.operators.head(args.top), args.markdown))
    if result.has_gpu:
        print(f"\n== kernels ({result.kernel_scope}) ==")
        print(printed_table(result.kernels[KERNEL_COLUMNS].head(args.top), args.markdown))
        if not result.roles.empty:
            print(f"\n== kernels by role in attention ({result.kernel_scope}) ==")
            print(printed_table(role_view(result.roles, result.kernel_unit), args.markdown))
            view = roofline_view(result.roofline).drop(columns=["Full name"])
            print("\n== roofline per kernel (figures from the trace: bytes, recorded shapes) ==")
            print(printed_table(view.head(args.top), args.markdown))
        launches = result.launch.per_kernel
        if not launches.empty:
            print("\n== launches (per kernel name) ==")
            print(printed_table(launches.drop(columns="name").head(args.top), args.markdown))
    return 0


COMMANDS = {
    "compare": compare_command,
    "diff": diff_command,
    "sweep": sweep_command,
    "analyze": analyze_command,
}


def keep_zip(made: Path, out: Path) -> Path:
    """Move a job's zip from its temp folder into `out` (made if missing) under a name no
    earlier zip there has: another Compare of other variants, or a Sweep of other lengths,
    at the same shape must not overwrite it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        destination, number = out / made.name, 2
        while destination.exists():
            destination, number = out / f"{made.stem}-{number}{made.suffix}", number + 1
        shutil.move(made, destination)
        return destination
    finally:  # the attnprof-zip-* folder it came from, moved or not
        shutil.rmtree(made.parent, ignore_errors=True)


NO_LIMIT = 2**62  # the CLI reads what the machine's memory allows (a stream: no copy of the file)


def load(path: str) -> Trace:
    """A trace file parsed, its errors prefixed with its path (diff reads two)."""
    regular_file_size(path)
    try:
        with progress_bar(Path(path).name) as progress:
            return load_trace(
                path, max_bytes=NO_LIMIT, progress=lambda done: progress(done, "reading")
            )
    except TraceError as exc:
        raise file_error(path, str(exc)) from None


def regular_file_size(path: str) -> int | None:
    """Its size; None when it cannot be stat'ed (the loader says why). A pipe or device is
    refused: the loader seeks, and /dev/stdin would read as empty or crash."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise file_error(
            path, "not a regular file (a pipe, device or folder); give a trace file's path"
        )
    return info.st_size


def file_error(path: str, message: str) -> TraceError:
    """A trace error that names the file it is about."""
    return TraceError(f"{path}: {message}")
