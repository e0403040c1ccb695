"""Command line: profile one variant (or all) like the post's scripts, no UI.

python -m profiling --variant sdpa-flash --seq-len 1024 --dtype bfloat16 --out traces
python -m profiling compare|diff|sweep|analyze ...   (see `python -m profiling compare -h`)
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

from attention import VARIANTS
from profiling.runner import ProfileResult, RunError, VariantUnavailable, run
from profiling.summary import summary_rows
from profiling.trace import Trace
from profiling.trace_events import TraceError, TraceTooBig
from profiling.workload import (
    DEVICES,
    DTYPES,
    LIMITS,
    ConfigError,
    Workload,
    known_variants,
    resolve_device,
)

SUBCOMMANDS = {
    "compare": "several variants at one shape, one after another",
    "diff": "per-kernel and per-operator deltas between two traces",
    "sweep": "variants over sequence lengths",
    "analyze": "operator and kernel tables of any torch.profiler trace (alias: analyse)",
}
ALIASES = {"analyse": "analyze"}  # the tab is called Analyse


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        # no abbreviations: `sweep --seq-len 1024` must not quietly mean --seq-lens
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    commands = "\n".join(f"  {name:9s} {text}" for name, text in SUBCOMMANDS.items())
    p = _Parser(
        prog="python -m profiling",
        description=__doc__.splitlines()[0],
        epilog=f"commands (python -m profiling COMMAND -h for their flags):\n{commands}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--variant", required=True, help=f"one of: {', '.join(VARIANTS)}, or all")
    _shape_flags(p, seq_len=True)
    p.add_argument("--out", default="traces", help="folder for <variant>/<tag>.json.gz and .txt")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv:
        argv[0] = ALIASES.get(argv[0], argv[0])
    if argv and argv[0] in SUBCOMMANDS:
        return views_main(argv)
    if argv and not argv[0].startswith("-"):  # a typo'd command would read as a missing --variant
        print(f"error: unknown command '{argv[0]}'; choose from: {', '.join(SUBCOMMANDS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    args = parser().parse_args(argv)
    names = list(VARIANTS) if args.variant == "all" else [args.variant]
    try:
        workloads = [Workload.from_user(variant=name, **_shape(args)) for name in names]
        device = resolve_device(args.device)
        _check_out(args.out)
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
    if len(workloads) > 1:
        print(f"== {len(workloads)} variants on {device} ==")
        print("\n".join(overview))
    return 1 if failures else 0


def _printed(result: ProfileResult) -> str:
    """Print a finished run (summary, files, operator table); its line of the overview."""
    result.trace_json.unlink(missing_ok=True)  # keep what the post keeps: .json.gz and .txt
    s = result.summary
    width = max(len(k) for k, _ in summary_rows(s))
    print("\n".join(f"{k:>{width}}  {v}" for k, v in summary_rows(s)))
    print(f"{'trace':>{width}}  {result.trace_gz}\n{'table':>{width}}  {result.table_txt}\n")
    print(result.table_txt.read_text())
    on_gpu = s.device == "cuda"
    has_gpu = on_gpu and s.gpu_us_per_forward is not None
    gpu = f"{s.gpu_us_per_forward:9.1f}" if has_gpu else "      n/a"
    kernels = f"{s.kernels_per_forward:5.2f}" if on_gpu else "  n/a"  # a CPU run has none
    return (
        f"{s.variant:22s} kernels/fwd {kernels}  GPU µs {gpu}  "
        f"CPU µs {s.cpu_us_per_forward:9.1f}  rel.err {s.rel_err:.1e}  ran: {s.ran}"
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


def _check_out(out: str) -> None:
    """Make --out and write a file in it before any run: a bad folder found after the runs (or
    as a traceback) wastes them. Folders made for the check are removed again, so a command
    refused later for a bad shape leaves nothing behind; the run makes them. Raises ConfigError."""
    path = Path(out)
    made = [p for p in (path, *path.parents) if not p.exists()]  # innermost first
    try:
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(0, "it exists and is not a folder")
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot write to --out '{out}': {exc.strerror or exc}") from None
    finally:
        for folder in made:
            try:
                folder.rmdir()
            except OSError:  # never made, or no longer empty
                break


# -- compare | diff | sweep | analyze ----------------------------------------------------------


def views_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m profiling", description="Compare, diff, sweep or analyse traces.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    c = sub.add_parser("compare", help=SUBCOMMANDS["compare"])
    c.add_argument(
        "--variants",
        type=_names,
        default=None,
        help="comma-separated ids (default: the post's six + kernels variants here)",
    )
    _shape_flags(c, seq_len=True)
    c.add_argument("--out", default="traces/compare", help="folder for traces and the zip")
    c.add_argument("--markdown", action="store_true", help="print Markdown tables")

    d = sub.add_parser("diff", help=SUBCOMMANDS["diff"])
    d.add_argument("trace_a", metavar="A.json[.gz]")
    d.add_argument("trace_b", metavar="B.json[.gz]")
    d.add_argument("--label-a", default=None, help="name of A in the tables (default: A)")
    d.add_argument("--label-b", default=None, help="name of B in the tables (default: B)")
    d.add_argument("--totals", action="store_true", help="totals over the windows, not per window")
    d.add_argument("--top", type=_at_least_one, default=25, help="rows to print per table")
    d.add_argument("--markdown", action="store_true", help="print Markdown tables")

    s = sub.add_parser("sweep", help=SUBCOMMANDS["sweep"])
    s.add_argument("--variants", type=_names, required=True, help="comma-separated ids")
    s.add_argument("--seq-lens", type=_lengths, default=None,
                   help="comma-separated lengths (default: 256 doubling to 16384, capped by "
                        "the memory estimate)")  # fmt: skip
    _shape_flags(s, seq_len=False)
    s.add_argument("--out", default="traces/sweep", help="folder for traces and the zip")
    s.add_argument("--markdown", action="store_true", help="print Markdown tables")

    a = sub.add_parser("analyze", help=SUBCOMMANDS["analyze"])
    a.add_argument("trace", metavar="TRACE.json[.gz]")
    a.add_argument("--top", type=_at_least_one, default=20, help="rows to print per table")
    a.add_argument("--max-mib", type=_at_least_one, default=1024,
                   help="limit on the file and on its JSON once gunzipped")  # fmt: skip
    a.add_argument("--markdown", action="store_true", help="print Markdown tables")
    return p


def views_main(argv: list[str]) -> int:
    args = views_parser().parse_args(argv)
    try:
        if args.command in ("compare", "sweep"):
            _check_out(args.out)
        return _VIEWS[args.command](args)
    except (ConfigError, TraceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _compare(args: argparse.Namespace) -> int:

    from profiling.compare import compare

    result = compare(args.variants, out_dir=args.out, progress=_progress, **_shape(args))
    print(f"== compare on {result.device_name} · {_shape_text(result.shape)} ==")
    cols = ["variant", "kernels/fwd", "GPU µs/fwd", "CPU µs/fwd", "bound", "peak MiB",
            "TFLOP/s", "% of peak", "rel. err", "ran", "dominant kernel", "GPU busy %",
            "launch delay µs", "CPU launch µs/fwd"]  # fmt: skip
    print(_table(result.glance[result.glance["status"] == "ok"][cols], args.markdown))
    missing = result.unavailable()
    if not missing.empty:
        print("\nnot run:")
        print("\n".join(f"  {r.variant} ({r.status}): {r.reason}" for r in missing.itertuples()))
    print("\n" + "\n".join(result.notes))
    if result.zip_path:
        print(f"zip: {_keep_zip(result.zip_path, Path(args.out))}")
    return 0 if result.ran else 1


def _diff(args: argparse.Namespace) -> int:
    from profiling.diff import diff, labelled
    from profiling.views_diff import diff_headline  # the page's headline, as plain text

    la, lb = args.label_a or "A", args.label_b or "B"
    for flag, label in (("--label-a", la), ("--label-b", lb)):
        if not label.isprintable():  # a newline would split a table row
            raise ConfigError(f"{flag} must be one line of printable text")
    if la == lb:
        raise ConfigError(
            f"--label-a and --label-b must differ (both are {la!r}): columns are named after them"
        )
    a, b = _load(args.trace_a), _load(args.trace_b)
    kernels, operators = diff(a, b, la, lb, per_forward=not args.totals)
    (sa, sb), (ua, ub) = kernels.attrs["scopes"], kernels.attrs["units"]
    print(f"{la} = {args.trace_a} ({sa}, {ua})\n{lb} = {args.trace_b} ({sb}, {ub})")
    if ua != ub:
        print("warning: the two are counted over different windows; profile both the same way")
    print(diff_headline(kernels, operators))
    print(f"deltas are {lb} − {la}, largest |Δ total µs| first")
    print("\n== kernels ==")
    print(_table(labelled(kernels.drop(columns="name")).head(args.top), args.markdown))
    print("\n== operators ==")
    print(_table(labelled(operators).head(args.top), args.markdown))
    return 0


def _sweep(args: argparse.Namespace) -> int:

    from profiling.sweep import sweep

    result = sweep(
        args.variants, args.seq_lens, out_dir=args.out, progress=_progress, **_shape(args)
    )
    print(f"== sweep on {result.device_name} · {_shape_text(result.shape)} ==")
    print(_table(result.table, args.markdown))
    print("\n" + "\n".join(result.notes))
    if result.zip_path:
        print(f"zip: {_keep_zip(result.zip_path, Path(args.out))}")
    return 0 if (result.table["status"] == "ok").any() else 1


def _keep_zip(made: Path, out: Path) -> Path:
    """Move a job's zip from its temp folder into `out` (made if missing) under a name no
    earlier zip there has: another Compare of other variants, or a Sweep of other lengths,
    at the same shape must not overwrite it."""
    import shutil

    try:
        out.mkdir(parents=True, exist_ok=True)
        dest, n = out / made.name, 2
        while dest.exists():
            dest, n = out / f"{made.stem}-{n}{made.suffix}", n + 1
        shutil.move(made, dest)
        return dest
    finally:  # the attnprof-zip-* folder it came from, moved or not
        shutil.rmtree(made.parent, ignore_errors=True)


def _analyze(args: argparse.Namespace) -> int:
    from profiling.analyze import analyze, bytes_text

    limit = args.max_mib * 1024**2
    size = _regular_file(args.trace)
    if size is not None and size > limit:
        raise _in(args.trace, f"the file is {bytes_text(size)}; the limit is --max-mib "
                              f"{args.max_mib} MiB (raise it)")  # fmt: skip
    try:
        result = analyze(args.trace, max_upload_bytes=limit, max_expanded_bytes=limit)
    except TraceTooBig as exc:
        raise _in(args.trace, f"{exc}; or raise --max-mib ({args.max_mib})") from None
    except TraceError as exc:
        raise _in(args.trace, str(exc)) from None
    width = max(len(k) for k, _ in result.summary)
    print("\n".join(f"{k:>{width}}  {v}" for k, v in result.summary))
    print(f"\n== operators and record_function spans (whole trace; top {args.top}) ==")
    print(_table(result.operators.head(args.top), args.markdown))
    if result.has_gpu:
        print(f"\n== kernels ({result.kernel_scope}) ==")
        cols = ["kernel", "category", "count", "total_us", "mean_us", "pct_gpu", "decoded"]
        print(_table(result.kernels[cols].head(args.top), args.markdown))
        launches = result.launch.per_kernel
        if not launches.empty:
            print("\n== launches (per kernel name) ==")
            print(_table(launches.drop(columns="name").head(args.top), args.markdown))
    return 0


_VIEWS = {"compare": _compare, "diff": _diff, "sweep": _sweep, "analyze": _analyze}


def _load(path: str) -> Trace:
    """A trace file parsed, its errors prefixed with its path (diff reads two)."""
    from profiling.trace import load

    _regular_file(path)
    try:
        return load(path)
    except TraceError as exc:
        raise _in(path, str(exc)) from None


def _regular_file(path: str) -> int | None:
    """Its size; None when it cannot be stat'ed (the loader says why). A pipe or device is
    refused: the loader seeks, and /dev/stdin would read as empty or crash."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise _in(path, "not a regular file (a pipe, device or folder); give a trace file's path")
    return info.st_size


def _in(path: str, message: str) -> TraceError:
    return TraceError(f"{path}: {message}")


def _range(name: str, extra: str = "") -> str:
    """The help of a shape flag: its limits (workload.LIMITS, which the CLI checks; the app's
    sliders and its CPU budget are narrower) and its default."""
    low, high = LIMITS[name]
    return f"{low}–{high}{extra} (default %(default)s)"


def _shape_flags(p: argparse.ArgumentParser, seq_len: bool) -> None:
    if seq_len:
        p.add_argument("--seq-len", type=int, default=1024, help=_range("seq_len"))
    p.add_argument("--dtype", default="bfloat16", help=f"{', '.join(DTYPES)} (default %(default)s)")
    p.add_argument("--batch", type=int, default=8, help=_range("batch"))
    p.add_argument("--heads", type=int, default=16, help=_range("heads"))
    p.add_argument("--head-dim", type=int, default=64, help=_range("head_dim", ", a multiple of 8"))
    p.add_argument("--no-causal", action="store_true", help="full (non-causal) attention")
    p.add_argument("--device", default="auto", choices=DEVICES)
    p.add_argument("--steps", type=int, default=3, help="active profiler steps, " + _range("steps"))


def _shape(args: argparse.Namespace) -> dict:
    shape = {
        "dtype": args.dtype, "batch": args.batch, "heads": args.heads,
        "head_dim": args.head_dim, "causal": not args.no_causal, "device": args.device,
        "steps": args.steps,
    }  # fmt: skip
    if hasattr(args, "seq_len"):
        shape["seq_len"] = args.seq_len
    return shape


def _shape_text(c: dict) -> str:
    s = f" S{c['seq_len']}" if "seq_len" in c else ""
    mask = "causal" if c["causal"] else "full"
    return f"B{c['batch']} H{c['heads']}{s} D{c['head_dim']} {c['dtype']} {mask}"


def _names(text: str) -> list[str]:
    try:
        return known_variants(n.strip() for n in text.split(",") if n.strip())
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _at_least_one(text: str) -> int:
    """--top and --max-mib: head(-3) would drop rows and 0 prints nothing, silently."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer ≥ 1, not {text!r}")
    return value


def _lengths(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("no sequence length given")
    return values


def _table(table, markdown: bool) -> str:
    from profiling.text_tables import markdown as to_markdown
    from profiling.text_tables import text_table

    if table.empty and not markdown:
        return "(empty)"
    return to_markdown(table) if markdown else text_table(table)


def _progress(fraction: float, text: str) -> None:
    print(f"[{fraction:4.0%}] {text}", file=sys.stderr, flush=True)


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
