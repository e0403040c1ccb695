"""The run store's costs (issue 34): recording a run (what a click adds), listing and
filtering 10⁵ stored runs, and reopening a run against analysing its trace.

    python benchmarks/store_bench.py --runs 100000 --repeats 20

1. record: hooks.keep of one H200 run's plain data (the sdpa-math fixture: its kernels, roles
   and operators rows, summary, trace copied by hash) into a store that already holds runs,
   as a Profile click does after its view is built; median and p90 ms.
2. list: a store filled with `--runs` runs (bulk-inserted rows of the same shape), then
   query.list_runs as History asks (newest 200, and the count of all that match), with no
   filter and with each filter; median ms. The rows are the page's view too (history_view).
3. reopen: views_reopen.reopened (the Profile view from the store and the kept trace) against
   views_analyze.analyze_page of the same trace, alternating; median ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.run import trace as run_trace
from profiling.store import hooks, open_store, query
from profiling.store.connection import opened, transaction
from profiling.store.rows import RunData, child_rows, run_columns
from profiling.store.write import insert_run, new_id
from tests.store.store_helpers import CONFIG, TRACE, summary


def fixture_run() -> RunData:
    trace = run_trace.read(TRACE)
    return RunData("profile", "app", dict(CONFIG), "ok", summary=summary(),
                   kernels=trace.kernels, roles=trace.roles(), trace_gz=TRACE)  # fmt: skip


DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
MONTH_AGO = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 30 * 86400))


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e3)
    return out


def said(name: str, ms: list[float]) -> None:
    ordered = sorted(ms)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    print(f"{name:44s} median {statistics.median(ms):8.2f} ms   p90 {p90:8.2f} ms   n={len(ms)}")


def fill(store, runs: int, data: RunData) -> None:
    """`runs` rows (each with the fixture run's child rows) in one transaction, spread over a
    year, five variants × six lengths × two devices; the rows are made once and re-keyed."""
    variants = ("naive", "sdpa-math", "sdpa-flash", "sdpa-cudnn", "flash-triton")
    start = time.time() - 365 * 86400
    children = child_rows(data)
    templates = {}
    for variant in variants:
        for shift in range(6):
            config = {**data.config, "variant": variant, "seq_len": 256 << shift}
            row = RunData(data.kind, data.origin, config, "ok", summary=data.summary)
            templates[variant, shift] = run_columns(row, "", 0.0, "bench", "")
    with opened(store.path) as connection, transaction(connection):
        for index in range(runs):
            columns = dict(templates[variants[index % 5], index % 6])
            device = DEVICES[index % 2]
            columns.update(id=new_id(), created=start + index * 300, device_name=device)
            insert_run(connection, columns, children)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    data = fixture_run()
    folder = Path(tempfile.mkdtemp(prefix="attnprof-store-bench-"))
    store = open_store(folder / "runs.sqlite")
    t = time.perf_counter()
    fill(store, args.runs, data)
    print(f"filled {args.runs:,} runs in {time.perf_counter() - t:.1f} s "
          f"({(store.path.stat().st_size) / 1e6:.0f} MB)")  # fmt: skip
    hooks.keep([data], store)  # the first record opens the connection (once per thread)
    said("record one run (a click's store write)", timed(lambda: hooks.keep([data], store), 200))
    for name, filters in (
        ("list newest 200 + count, no filter", {}),
        ("list, variant=sdpa-flash", {"variant": "sdpa-flash"}),
        ("list, shape contains S1024", {"shape": "S1024"}),
        ("list, device contains h200", {"device": "h200"}),
        ("list, since a month ago", {"since": MONTH_AGO}),
    ):  # fmt: skip
        checked = query.checked_filters(**filters)
        said(name, timed(lambda c=checked: query.list_runs(store, c), args.repeats))
    reopen_and_analyse(store, args.repeats)


def reopen_and_analyse(store, repeats: int) -> None:
    from profiling.views import analyze as views_analyze
    from profiling.views import reopen as views_reopen

    run_id = query.list_runs(store, query.checked_filters(limit=1))[0]["id"][0]
    reopen, analyse = [], []
    for _ in range(repeats):
        reopen += timed(lambda: views_reopen.reopened(store, run_id), 1)
        analyse += timed(lambda: views_analyze.analyze_page(TRACE), 1)
    said(f"reopen a run ({TRACE.name})", reopen)
    said("Analyse of the same trace", analyse)


if __name__ == "__main__":
    main()
