"""What option (c) of issue #7 could reach: the run's post-processing as plain Python loops.

(The measurement that decided it: option (c) is built since as profiling/run/records.py, which
has every rule this lower bound leaves out and is held equal to the trace model by tests.)

    python benchmarks/plain_floor.py          # this machine; the H200 host via h200_session.sh

The overhead target (≤ 1.5× the post's bare script) is missed only by the fused-kernel variants,
whose whole bare run is 6–12 ms while the app's trace load, forward attribution, per-forward
figures, kernel table and Gantt cost ~4–5 ms in a tight loop (`parse_floor.py`), most of it
pandas' and numpy's fixed cost per call on traces of ~20 complete events. Option (c) would keep
a second implementation, in plain Python, for such small traces. Before deciding, this measures
how fast that could be: the same five steps written as loops over dicts, on the same stored
H200 traces, beside `parse_floor.py`'s figures for the real code (best of 5 × 300, µs).

It is a lower bound, not a port: it has only the rules these traces need (complete events on
tidy lanes, attn_fwd windows on one thread, launches linked by correlation id), none of the
trace model's checks (lenient parsing, renesting, limits, ProfilerStep windows across threads),
and a bare Gantt (bars and hover text, no level of detail, links or step marks). The last
column adds what the result must still hand the page: the spans and the kernel table as pandas
frames (the views, Compare and Diff read those).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
import orjson
import pandas as pd

from benchmarks.parse_floor import FIXTURES, best_us, steps, stored_trace
from profiling.kernels.names import classify, decode, short_name

GPU = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH = {"cuda_runtime", "cuda_driver"}


def load(path: Path) -> list[dict[str, Any]]:
    """Complete events as span dicts: lane, times from the first step, depth, parent, self."""
    events = msgspec.json.decode(path.read_bytes())["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e and e.get("cat") != "Trace"]
    steps_ts = [e["ts"] for e in spans if str(e.get("name", "")).startswith("ProfilerStep#")]
    t0 = min(steps_ts) if steps_ts else min(e["ts"] for e in spans)
    out = []
    for e in spans:
        args = e.get("args") or {}
        cat = e.get("cat", "")
        out.append({
            "name": e["name"], "cat": cat, "kind": "gpu" if cat in GPU or cat ==
            "gpu_user_annotation" else "cpu", "lane": (e["pid"], e["tid"]),
            "start": e["ts"] - t0, "dur": e["dur"], "corr": args.get("correlation"), "args": args,
        })  # fmt: skip
    out.sort(key=lambda s: (s["lane"], s["start"], -s["dur"]))
    stack: list[dict[str, Any]] = []
    for s in out:
        while stack and (stack[-1]["lane"] != s["lane"] or
                         s["start"] >= stack[-1]["start"] + stack[-1]["dur"]):  # fmt: skip
            stack.pop()
        s["parent"] = stack[-1] if stack else None
        s["depth"] = len(stack)
        s["self"] = s["dur"]
        if stack:
            stack[-1]["self"] -= s["dur"]
        stack.append(s)
    return out


def attribute(spans: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """attn_fwd windows, and the GPU work launched inside them (by correlation id)."""
    windows = [s for s in spans if s["kind"] == "cpu" and s["name"] == "attn_fwd"]
    by_corr = {s["corr"]: s for s in spans if s["cat"] in GPU and s["corr"] is not None}
    work = []
    for s in spans:
        if s["cat"] in LAUNCH and s["corr"] in by_corr:
            for w in windows:
                if w["lane"] == s["lane"] and w["start"] <= s["start"] <= w["start"] + w["dur"]:
                    work.append(by_corr[s["corr"]])
                    break
    return windows, work


def per_forward(windows: list[dict], work: list[dict]) -> dict[str, Any]:
    n = max(len(windows), 1)
    cpu = [w["dur"] for w in windows]
    totals: dict[str, float] = defaultdict(float)
    for s in work:
        totals[s["name"]] += s["dur"]
    return {
        "forwards": len(windows),
        "kernels": sum(s["cat"] == "kernel" for s in work) / n,
        "memcpy": sum(s["cat"] == "gpu_memcpy" for s in work) / n,
        "memset": sum(s["cat"] == "gpu_memset" for s in work) / n,
        "gpu_us": sum(s["dur"] for s in work) / n,
        "cpu_us": sum(cpu) / n,
        "cpu_range": (min(cpu), max(cpu)) if cpu else None,
        "dominant": max(totals, key=totals.__getitem__) if totals else None,
    }


def kernel_rows(work: list[dict], per: int) -> list[dict[str, Any]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for s in work:
        groups[s["name"]].append(s)
    total = sum(s["dur"] for s in work) or 1.0
    rows = []
    for name, group in groups.items():
        durs = [s["dur"] for s in group]
        args = group[0]["args"]
        rows.append({
            "kernel": short_name(name), "category": classify(name), "count": len(group) / per,
            "total_us": sum(durs) / per, "mean_us": sum(durs) / len(durs), "min_us": min(durs),
            "max_us": max(durs), "pct_gpu": 100 * sum(durs) / total,
            "registers_per_thread": args.get("registers per thread"),
            "grid": str(args.get("grid")), "block": str(args.get("block")),
            "decoded": decode(name), "name": name,
        })  # fmt: skip
    rows.sort(key=lambda r: -r["total_us"])
    return rows


def gantt_json(spans: list[dict[str, Any]]) -> bytes:
    traces: dict[str, dict[str, list]] = {}
    for s in spans:
        row = f"{s['lane'][0]}/{s['lane'][1]} · {s['depth']}"
        t = traces.setdefault(s["cat"], {"base": [], "x": [], "y": [], "hovertext": []})
        t["base"].append(s["start"])
        t["x"].append(s["dur"])
        t["y"].append(row)
        t["hovertext"].append(f"<b>{s['name']}</b><br>{s['start']:,.1f} µs + {s['dur']:,.1f} µs")
    data = [{"type": "bar", "orientation": "h", "name": c, **cols} for c, cols in traces.items()]
    return orjson.dumps({"data": data, "layout": {"barmode": "overlay", "title": "x"}})


def frames(spans: list[dict[str, Any]], rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, ...]:
    keys = ("name", "cat", "kind", "start", "dur", "depth", "self")
    table = pd.DataFrame({k: [s[k] for s in spans] for k in keys})
    return table, pd.DataFrame(rows)


def plain_steps(path: Path) -> list:
    spans = load(path)
    windows, work = attribute(spans)
    rows = kernel_rows(work, max(len(windows), 1))
    return [
        lambda: load(path),
        lambda: attribute(spans),
        lambda: per_forward(windows, work),
        lambda: kernel_rows(work, max(len(windows), 1)),
        lambda: gantt_json(spans),
        lambda: frames(spans, rows),
    ]


def main() -> None:
    labels = ("load", "forward attribution", "per-forward", "kernel table", "Gantt + JSON")
    print(f"| trace | code | {' | '.join(labels)} | sum | + frames | sum with frames |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in FIXTURES:
        path = stored_trace(name)
        real = [best_us(step) for step in steps(name)]
        plain = [best_us(step) for step in plain_steps(path)]
        stats = per_forward(*attribute(load(path)))
        cells = " | ".join(f"{c:.0f}" for c in real)
        print(f"| {name} | profiling/ (today) | {cells} | {sum(real):.0f} | — | — |")
        cells = " | ".join(f"{c:.0f}" for c in plain[:5])
        print(f"| {name} | plain Python | {cells} | {sum(plain[:5]):.0f} | {plain[5]:.0f} | "
              f"{sum(plain):.0f} |")  # fmt: skip
        print(
            f"|  | (its reading: {stats['kernels']:.0f} kernel/fwd, {stats['gpu_us']:.1f} GPU "
            f"µs/fwd, {stats['cpu_us']:.1f} CPU µs/fwd) | | | | | | | | |"
        )


if __name__ == "__main__":
    main()
