"""Parse, tables and Gantt for traces of 10⁴ to 10⁷ events, beside json.load and HTA (#7, #24).

    python benchmarks/bench_scale.py [--sizes 10000,100000,1000000] [--no-hta] [--no-json]
        [--trace FILE.json.gz] [--out DIR] [--hta-python /tmp/hta-venv/bin/python]

HTA 0.5.0 fails on pandas 3 for traces above 32767 events (it assigns event indices into an
int16 column, which pandas 3 refuses instead of upcasting), so its side can run under another
interpreter: `python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install
HolisticTraceAnalysis==0.5.0 "pandas<3" psutil`, then pass --hta-python.

Each measurement runs in a fresh subprocess so its peak RSS is its own. Our pipeline: trace
load (profiling.trace.model) + per-forward summary + kernel table + launch/idle stats + operator
table from cpu_op spans (what the Analyse tab computes) + Gantt figure + its JSON (what the
browser receives). HTA: `TraceAnalysis(trace_dir=...)` loading the same file (parse only: its
analyses would come on top). `cli`: `python -m profiling analyze FILE` end to end, as a user
runs it. Traces come from benchmarks/gen_trace_stream.py (deterministic), or --trace.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def ours(path: str) -> dict:
    began = time.perf_counter()
    from profiling.analysis import analyze
    from profiling.gantt import spec as gantt
    from profiling.trace import model as trace

    imported = time.perf_counter()
    tr = trace.load(path)
    loaded = time.perf_counter()
    result = analyze.from_trace(tr, name=Path(path).name)
    tables = time.perf_counter()
    fig = gantt.gantt_spec(tr.spans, tr.lanes)  # what the Analyse tab hands gr.Plot
    built = time.perf_counter()
    payload = fig.to_json()  # the JSON gr.Plot sends to the browser
    done = time.perf_counter()
    return {
        "spans": len(tr.spans), "events": tr.n_events,
        "import_s": imported - began, "load_s": loaded - imported,
        "tables_s": tables - loaded, "figure_s": built - tables, "json_s": done - built,
        "total_s": done - imported, "payload_mb": len(payload) / 1e6,
        "bars": gantt.bar_count(fig), "spans_drawn": gantt.spans_drawn(fig),
        "operators": len(result.operators), "kernels": len(result.kernels),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "helper_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }  # fmt: skip


def cli(path: str) -> dict:
    """`python -m profiling analyze` end to end (imports, read, tables, printing), as a user
    runs it; its peak RSS with the helper process's."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "profiling", "analyze", path],
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"total_s": time.perf_counter() - began, "peak_rss_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime}  # fmt: skip


def plain_json(path: str) -> dict:
    """`json.load` of the same file: the floor of any reader that builds Python objects."""
    import gzip

    began = time.perf_counter()
    with gzip.open(path) as fh:
        json.load(fh)
    return {"load_s": time.perf_counter() - began,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip


def hta(path: str) -> dict:
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    import pandas
    from hta.trace_analysis import TraceAnalysis

    folder = Path(tempfile.mkdtemp(prefix="hta-scale-"))
    shutil.copyfile(path, folder / f"rank-0{''.join(Path(path).suffixes)}")
    began = time.perf_counter()
    TraceAnalysis(trace_dir=str(folder))
    done = time.perf_counter()
    return {"load_s": done - began, "pandas": pandas.__version__,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip


def in_subprocess(kind: str, path: Path, python: str = sys.executable) -> dict:
    p = subprocess.run(
        [python, __file__, "--one", kind, str(path)],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="10000,100000,1000000")
    p.add_argument("--no-hta", action="store_true")
    p.add_argument("--no-json", action="store_true", help="skip json.load (≈5× the JSON in RAM)")
    p.add_argument("--out", default=None)
    p.add_argument("--hta-python", default=sys.executable, help="interpreter with HTA installed")
    p.add_argument("--trace", default=None, help="an existing .json.gz (its size: --sizes)")
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        kind, path = args.one
        measure = {"ours": ours, "cli": cli, "json": plain_json, "hta": hta}[kind]
        print(json.dumps(measure(path)))
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gen_trace_stream import write  # written as a stream: 10⁷ events in a few MB

    work = Path(tempfile.mkdtemp(prefix="scale-"))
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        path = Path(args.trace) if args.trace else write(n, work / f"trace_{n}.json.gz")
        load = os.getloadavg()
        mine = in_subprocess("ours", path)
        command = in_subprocess("cli", path)
        plain = {} if args.no_json else in_subprocess("json", path)
        theirs = {} if args.no_hta else in_subprocess("hta", path, args.hta_python)
        rows.append({"events": n, "file_mb": path.stat().st_size / 1e6, "ours": mine,
                     "cli": command, "json": plain, "hta": theirs,
                     "load_average": [load, os.getloadavg()]})  # fmt: skip
        if not args.trace:
            path.unlink()
        print(json.dumps(rows[-1]), flush=True)
    lines = [
        "| events | file MB | spans | load s | tables s | figure+JSON s | total s | payload MB | "
        "bars (spans drawn) | peak RSS MB | CLI analyze s | CLI peak RSS MB | json.load s | "
        "json.load RSS MB | HTA load s | HTA peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o, c, j, h = r["ours"], r["cli"], r["json"], r["hta"]
        if "error" in o:
            lines.append(f"| {r['events']:,} | {r['file_mb']:.1f} | error: {o['error']} |")
            continue
        lines.append(
            f"| {r['events']:,} | {r['file_mb']:.1f} | {o['spans']:,} | {o['load_s']:.2f} | "
            f"{o['tables_s']:.2f} | {o['figure_s'] + o['json_s']:.2f} | {o['total_s']:.2f} | "
            f"{o['payload_mb']:.2f} | {o['bars']:,} ({o['spans_drawn']:,}) | "
            f"{o['peak_rss_mb']:.0f} + {o['helper_peak_rss_mb']:.0f} | {_cell(c, 'total_s')} | "
            f"{_cell(c, 'peak_rss_mb', 0)} | {_cell(j, 'load_s')} | {_cell(j, 'peak_rss_mb', 0)} | "
            f"{_cell(h, 'load_s')} | {_cell(h, 'peak_rss_mb', 0)} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scale.md").write_text(table + "\n")
        (out / "scale.json").write_text(json.dumps(rows, indent=1))


def _cell(measured: dict, key: str, digits: int = 2) -> str:
    if key in measured:
        return f"{measured[key]:,.{digits}f}"
    return measured.get("error", "—")


if __name__ == "__main__":
    main()
