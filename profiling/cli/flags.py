"""The command line's flags: one parser type, the shape flags every command shares, the values
they take, and how a command prints its tables and progress.

`python -m profiling` (profiling/__main__.py) and its compare | diff | sweep | analyze
commands (profiling/cli/commands.py) both build their parsers from these.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from profiling.text_tables import markdown, text_table
from profiling.user_values import ConfigError
from profiling.vocabulary import DEVICES
from profiling.workload.controls import (
    BY_NAME,
    FLAG_ORDER,
    JOB_OPTIONS,
    SHAPE_ORDER,
    Control,
    flag_help,
)

SUBCOMMANDS = {
    "compare": "several variants at one shape, one after another",
    "diff": "per-kernel and per-operator deltas between two traces",
    "sweep": "variants over sequence lengths",
    "analyze": "operator and kernel tables of any torch.profiler trace (alias: analyse)",
    "history": "the run store: list | show | diff | compare | trend | export | import | prune",
    "model": "attention inside a transformers model, each attn_implementation (issue 43)",
}


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations, and its errors as one line with exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no abbreviations: `sweep --seq-len 1024` must not quietly mean --seq-lens
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def add_shape_flags(parser: argparse.ArgumentParser, seq_len: bool, counters: bool = False) -> None:
    """The shape flags, declared in profiling/workload/controls.py (--seq-len where the
    command has it; --counters for the profile and compare commands), with --device and
    --verbose among them."""
    for name in FLAG_ORDER:
        if (name == "seq_len" and not seq_len) or (name == "counters" and not counters):
            continue
        if name == "device":
            parser.add_argument("--device", default="auto", choices=DEVICES)
        elif name == "verbose":
            verbose = "also show torch.profiler's own log lines (kineto's USDT/STAGE) on stderr"
            parser.add_argument("--verbose", action="store_true", help=verbose)
        else:
            _add_flag(parser, BY_NAME[name])
    add_store_flags(parser, runs=True)


def _add_flag(parser: argparse.ArgumentParser, control: Control) -> None:
    flag = control.flag
    option = flag.option or "--" + control.name.replace("_", "-")
    if control.annotation is bool:  # a switch that turns the field's default off
        parser.add_argument(option, action="store_true", help=flag_help(control))
        return
    options: dict[str, Any] = {"default": flag.default, "help": flag_help(control)}
    options |= {"type": flag.type} if flag.type else {}
    options |= {"choices": flag.choices} if flag.choices else {}
    parser.add_argument(option, **options)


def add_store_flags(parser: argparse.ArgumentParser, runs: bool = False) -> None:
    """--store PATH (and, for commands that make runs, --no-store): issue 34's run store."""
    from profiling.store.location import default_path

    here = default_path()  # ATTNPROF_STORE, a Space's /data, $XDG_DATA_HOME, ~/.local/share
    where = (f"the run store (default here: {str(here).replace('%', '%%')}: ATTNPROF_STORE, "
             "else $XDG_DATA_HOME/attention-profiler/runs.sqlite, else ~/.local/share/…)"
             if here else "the run store (default here: none, ATTNPROF_STORE=off)")  # fmt: skip
    parser.add_argument("--store", default=None, metavar="PATH", help=where)
    if runs:
        parser.add_argument("--no-store", action="store_true", help="keep no record of the runs")


def store_of(args: argparse.Namespace) -> Any:
    """The store the flags name: None with --no-store, "default" without --store (the hooks
    then follow ATTNPROF_STORE), else the store at PATH."""
    if getattr(args, "no_store", False):
        return None
    if args.store is None:
        return "default"
    from profiling.store import open_store

    return open_store(args.store)


def said_kept(kept: Any) -> None:
    """Where a command's runs were kept (or why not), on stderr: stdout stays the tables."""
    ids = [run_id for run_id in kept.ids if run_id]
    if ids:
        shown = ", ".join(ids[:3]) + (f" … ({len(ids)} runs)" if len(ids) > 3 else "")
        print(f"kept in the run store: {shown} (python -m profiling history show ID)",
              file=sys.stderr)  # fmt: skip
    for note in kept.notes:
        print(f"run store: {note}", file=sys.stderr)


def add_ray_flag(parser: argparse.ArgumentParser) -> None:
    """--ray [ADDRESS]: the points on a Ray cluster, one per GPU (profiling/jobs/ray.py)."""
    from profiling.jobs.executor import LOCAL

    parser.add_argument(
        "--ray",
        nargs="?",
        const=LOCAL,
        default=None,
        metavar="ADDRESS",
        help="run the points on a Ray cluster, one per GPU at a time: at ADDRESS (e.g. "
        "auto, or host:6379 of `ray start --head`), or, without one, on a cluster started "
        "here with every GPU of this machine (default: one after another in this process)",
    )


def shape_of(args: argparse.Namespace) -> dict[str, Any]:
    """The Workload fields the shape flags gave (seq_len only where the command has it)."""
    names = (*SHAPE_ORDER, *JOB_OPTIONS)  # counters: where the command has the flag
    shape = {name: getattr(args, name) for name in names if hasattr(args, name)}
    return shape | {"causal": not args.no_causal, "device": args.device}


def variant_names(text: str) -> list[str]:
    """--variants: comma-separated registered ids."""
    try:
        from profiling.workload.spec import known_variants  # torch: only for runs

        return known_variants(name.strip() for name in text.split(",") if name.strip())
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def at_least_one(text: str) -> int:
    """--top and --max-mib: head(-3) would drop rows and 0 prints nothing, silently."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer ≥ 1, not {text!r}")
    return value


def lengths(text: str) -> list[int]:
    """--seq-lens: comma-separated whole numbers (their range is the sweep's to check)."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("no sequence length given")
    return values


def check_out(out: str) -> None:
    """Make --out and write a file in it before any run: a bad folder found after the runs (or
    as a traceback) wastes them. Folders made for the check are removed again, so a command
    refused later for a bad shape leaves nothing behind; the run makes them. Raises ConfigError."""
    path = Path(out)
    made = [folder for folder in (path, *path.parents) if not folder.exists()]  # innermost first
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


def printed_table(table: pd.DataFrame, as_markdown: bool) -> str:
    """A table as the commands print it: Markdown with --markdown, else aligned text."""
    if table.empty and not as_markdown:
        return "(empty)"
    return markdown(table) if as_markdown else text_table(table)


@contextmanager
def progress_bar(what: str) -> Iterator[Callable[[float, str], None]]:
    """A bar on stderr (tqdm) while a trace is read and analysed, as progress(fraction, text).
    Drawn only when stderr is a terminal (tqdm's own rule), so piped output stays clean."""
    shape = "{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}"
    with tqdm(
        total=100, desc=what, file=sys.stderr, disable=None, leave=False, bar_format=shape
    ) as bar:

        def advance(fraction: float, text: str) -> None:
            bar.set_description_str(f"{what}: {text}", refresh=False)
            bar.update(max(0.0, round(100 * fraction, 1) - bar.n))

        yield advance


@contextmanager
def job_progress(ray: str | None) -> Iterator[Callable[[float, str], None]]:
    """A job's progress: a line per message in this process; on Ray, a bar over the points
    that names each worker's current point."""
    if ray is None:
        yield print_progress
        return
    with progress_bar("points") as advance:
        yield advance


def print_progress(fraction: float, text: str) -> None:
    """A job's progress on stderr, so stdout stays the tables."""
    print(f"[{fraction:4.0%}] {text}", file=sys.stderr, flush=True)
