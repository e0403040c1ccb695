"""`python -m profiling history list | show ID | diff A B | compare ID… | trend ID | export FILE |
import FILE | prune`: the run store from a terminal, with the History tab's views (no torch:
a laptop reads an H200's exported runs)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from profiling.cli.flags import Parser, add_store_flags, at_least_one, printed_table
from profiling.store import StoreError, open_store, query
from profiling.store.model_summary import MODEL_KINDS
from profiling.trace.events import TraceError
from profiling.user_values import ConfigError

LIST_FILTERS = ("variant", "shape", "mode", "device", "since", "until")


def history_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m profiling history", description=" ".join(__doc__.split()))
    add_store_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    listed = commands.add_parser("list", help="stored runs, newest first")
    for name in LIST_FILTERS:
        listed.add_argument(f"--{name}", default="", help=_filter_help(name))
    listed.add_argument("--limit", type=at_least_one, default=query.DEFAULT_ROWS)
    commands.add_parser("show", help="one run's summary and tables").add_argument("id")
    diffed = commands.add_parser("diff", help="the Diff of two runs' kept traces")
    diffed.add_argument("ids", nargs=2, metavar="ID")
    diffed.add_argument("--top", type=at_least_one, default=25, help="rows per table")
    compared = commands.add_parser("compare", help="stored figures side by side (any devices)")
    compared.add_argument("ids", nargs="+", metavar="ID")
    commands.add_parser("trend", help="one run's workload over time, regressions").add_argument(
        "id"
    )
    commands.add_parser("export", help="to .parquet or .jsonl (traces beside)").add_argument("file")
    commands.add_parser("import", help="merge a store or an export").add_argument("file")
    pruned = commands.add_parser("prune", help="apply the traces' size cap now")
    pruned.add_argument("--max-bytes", type=int, default=None, help="cap (default 2 GB)")
    rows_cap = "rows' cap (default ATTNPROF_STORE_MAX_RUNS, else 100,000)"
    pruned.add_argument("--max-runs", type=at_least_one, default=None, help=rows_cap)
    for sub in commands.choices.values():
        sub.add_argument("--markdown", action="store_true", help="print Markdown tables")
    return parser


def _filter_help(name: str) -> str:
    return {"shape": "part of the shape, e.g. S1024", "device": "part of the device's name, or cpu",
            "since": "YYYY-MM-DD", "until": "YYYY-MM-DD"}.get(name, f"exact {name}")  # fmt: skip


def history_main(argv: list[str]) -> int:
    args = history_parser().parse_args(argv)
    store = open_store(args.store)
    if store is None:
        print(
            "error: the run store is off (ATTNPROF_STORE=off); pass --store PATH", file=sys.stderr
        )
        return 2
    try:
        return HISTORY[args.command](store, args)
    except (ConfigError, TraceError, StoreError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def list_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.views.history import history_note, history_view

    filters = query.checked_filters(**{n: getattr(args, n) for n in LIST_FILTERS},
                                    limit=args.limit)  # fmt: skip
    runs, total = query.list_runs(store, filters)
    print(printed_table(history_view(runs), args.markdown))
    print(history_note(len(runs), total, store).replace("`", ""))
    if query.read_only(store):
        print("The run store is read-only (its file, folder or disk): read as it is; no run "
              "can be kept in it.")  # fmt: skip
    return 0


def show_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.views.history import stored_summary, trace_state, when
    from profiling.views.shared import kernel_view, operator_view, role_view
    from profiling.views.text.summary import summary_rows

    run = query.get_run(store, args.id)
    print(f"run {run['id']} · {when(run['created'])} UTC · {run['kind']} ({run['origin']}) · "
          f"trace {trace_state(run)}")  # fmt: skip
    if run["status"] != "ok":
        print(f"{run['variant']} · {run['shape']}: {run['status']} — {run['reason']}")
        return 0
    if run["kind"] in MODEL_KINDS:
        return _show_model(run, args.markdown)
    rows = summary_rows(stored_summary(run))
    width = max(len(name) for name, _ in rows)
    print("\n".join(f"{name:>{width}}  {value}" for name, value in rows))
    tables = query.children(store, run["id"])
    operators = operator_view(tables["operators"], run["device"] or "cpu")
    shown_tables = (("kernels", kernel_view(tables["kernels"])),
                    ("kernels by role", role_view(tables["roles"])),
                    ("operators", operators))  # fmt: skip
    for title, table in shown_tables:
        if table.empty:
            print(f"\n== {title} ==\n(none: {NONE_BECAUSE[title]})")
            continue
        shown = table.drop(columns="Full name", errors="ignore")
        print(f"\n== {title} ==\n{printed_table(shown, args.markdown)}")
    return 0


def _show_model(run: dict[str, Any], markdown: bool) -> int:
    """A model run (issue 43) as the Model tab shows its implementation: the tables, then what
    ran and SDPA's reasons."""
    from profiling.views.model import why
    from profiling.views.model.stored import shown_lines, stored_model

    result = stored_model(run)
    print(f"{run['variant']} · {result.text} · {result.device_name or result.device}")
    for title, table in shown_lines(result):
        print(f"\n== {title} ==\n{printed_table(table, markdown)}")
    print("\n" + why.text(result))
    return 0


NONE_BECAUSE = {"kernels": "no GPU kernels were recorded (a CPU run launches none)",
                "kernels by role": "no GPU kernels to assign roles to",
                "operators": "this run kept no operator table"}  # fmt: skip


def diff_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.views.history import diff_runs

    shown = diff_runs(store, args.ids)
    print(shown.headline)
    for title, table in (("kernels", shown.kernels), ("operators", shown.operators),
                         ("by role in attention", shown.roles)):  # fmt: skip
        if table is not None and not table.empty:
            print(f"\n== {title} ==\n{printed_table(table.head(args.top), args.markdown)}")
    return 0


def compare_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.views.history import compare_runs

    print(printed_table(compare_runs(store, args.ids), args.markdown))
    return 0


def trend_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.store.trend import RULE
    from profiling.views.history import trend_table

    points = trend_table(store, args.id)
    print(printed_table(trend_text(points), args.markdown))
    print(f"\nrule: {RULE}")
    return 0


def trend_text(points: Any) -> Any:
    """The trend as a terminal shows it: each run's time as a UTC date, its flag as a word."""
    from profiling.views.history import when

    return (
        points.round(1)
        .assign(
            created=[when(t) for t in points["created"]],
            regression=["regression" if flagged else "no" for flagged in points["regression"]],
        )
        .rename(columns={"created": "created (UTC)"})
    )


def export_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.store.exchange import export_runs

    count, written = export_runs(store, args.file)
    print(f"exported {count} runs: " + ", ".join(str(p) for p in written))
    return 0


def import_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.store.exchange import import_runs

    done = import_runs(store, args.file)
    print(f"imported {done.added} runs ({done.skipped} already here, {done.traces} traces "
          f"copied) into {store.path}")  # fmt: skip
    return 0


def prune_command(store: Any, args: argparse.Namespace) -> int:
    from profiling.store.write import apply_cap, apply_runs_cap, runs_cap_message

    runs_cap = store.max_runs if args.max_runs is None else args.max_runs
    removed = apply_runs_cap(store, runs_cap)
    print(runs_cap_message(removed, runs_cap) if removed
          else f"the runs are within the cap ({runs_cap:,} runs)")  # fmt: skip
    pruned = apply_cap(store, store.max_bytes if args.max_bytes is None else args.max_bytes)
    print(pruned.message() if pruned else f"the traces are within the cap ({pruned.cap:,} bytes)")
    return 0


HISTORY = {"list": list_command, "show": show_command, "diff": diff_command,
           "compare": compare_command, "trend": trend_command, "export": export_command,
           "import": import_command, "prune": prune_command}  # fmt: skip
