"""Issue 43 on the GPU: is a decode step's GPU busy time, read from the trace, its GPU work?

A decode of 64 tokens is host-bound (tiny kernels waiting for their launches), and the profiler
lengthens the step's span 1.22–1.62× (benchmarks/model_decode_overhead.py): its per-operator
cost on the CPU widens the gaps between kernels, not the kernels. So the step's busy time (the
union of its kernels' intervals, profiling/analysis/model/step.py `step_times`) should be the
GPU's work, as an independent timing sees it: the same decode captured in a CUDA graph and
replayed (no launch gaps, kernels back to back), timed with CUDA events. Per implementation:

(a) profiled as the app runs it (profiling/run/model/runner.py, the trace read with this
    project's reader): per step, the GPU span, the busy time, the sum of the work's durations;
    and the app's own bare timing (CUDA events, in the same process after the profiler);
(b) bare: the app's step (steps.make_step) timed with CUDA events in a process that never ran
    the profiler;
(c) the decode captured in a CUDA graph (benchmarks/model_decode_graph.py: with the app's
    DynamicCache; with transformers' StaticCache where that fails, or with `--static`),
    replays timed with CUDA events; the same decodes run uncaptured too, to show they match (b).

Each part runs in its own process (a failed capture cannot spoil the rest; the profiler leaves
nothing behind for (b)); a part that fails says why and the others still run. The table is
ms per step (a step: the decode of `--new-tokens` tokens); busy/graph is the bar's ratio. A
replay still spaces its kernels by the graph's own launch latency (about a µs each), which no
trace of the profiled step can see: (graph − busy) / item says how much a work item that is.

    python3 benchmarks/model_decode_busy.py --out DIR [--implementations eager,sdpa,kernels]
        [--steps 3] [--repeat 5] [--replays 20] [--static]
    python3 benchmarks/model_decode_busy.py --preset tiny --device cpu --new-tokens 8  # smoke
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

IMPLEMENTATIONS = "eager,sdpa,kernels"
GPU_SHAPE = (4096, "4096,3000,2048,512")
CPU_SHAPE = (64, "64,48,32,8")  # the smoke: a tiny preset's ragged batch
TIMEOUT_S = 300


def workload(args, implementations: list[str]):
    from profiling.workload.model.spec import ModelWorkload

    seq_len, lengths = GPU_SHAPE if args.device == "cuda" else CPU_SHAPE
    return ModelWorkload.from_user(
        preset=args.preset, layers=2, batch=4, seq_len=args.seq_len or seq_len,
        lengths=args.lengths or lengths, mode="decode", new_tokens=args.new_tokens,
        dtype="bfloat16" if args.device == "cuda" else "float32", implementations=implementations,
        device=args.device, steps=args.steps, check=False,
    )  # fmt: skip


def profiled_part(args) -> dict:
    """(a): the app's run of every implementation; each step's figures from its trace."""
    from profiling.analysis.model.step import step_times
    from profiling.run.model.runner import run
    from profiling.trace import model as trace_model

    result = run(workload(args, args.implementations.split(",")), tempfile.mkdtemp())
    out = {}
    for item in result.runs:
        if not item.ok:
            out[item.id] = {"failed": item.refused or item.failed}
            continue
        times = step_times(trace_model.load(item.trace))
        out[item.id] = {
            "ran": item.ran + (f" ({item.note})" if item.note else ""),
            "steps": times.to_dict("records"),
            "split_step_ms": item.split.step_us / 1e3,
            "app_bare_ms": item.timed_ms,
        }
    return out


def graph_part(args) -> dict:
    """(b) and (c) for one implementation (`--implementation`)."""
    import torch

    from benchmarks import model_decode_graph as g
    from profiling.run.model import build as building
    from profiling.run.model.implementations import IMPLEMENTATIONS as KNOWN
    from profiling.run.model.implementations import unavailable
    from profiling.run.model.runner import _set
    from profiling.run.model.steps import make_step

    work = workload(args, [args.implementation])
    implementation = KNOWN[args.implementation]
    refused = unavailable(
        implementation.id, work.spec, work.preset, args.device, work.torch_dtype
    )  # the app's refusals, as its runner asks them
    if refused:
        return {"failed": f"{implementation.id}: {refused}"}
    model, _ = building.build(work, args.device)
    ran, note = _set(model, implementation, work.spec.softcap)
    inputs = building.batch(work, args.device)
    out: dict = {"ran": ran + (f" ({note})" if note else ""), "captures": {}}
    with implementation.context():
        step = make_step(work, model, inputs, args.device)
        for _ in range(2):
            step()
        out["bare_ms"] = g.timed_ms(step.run, step.prepare, args.device, args.repeat)
        with torch.no_grad():
            prompt = model(
                input_ids=inputs.input_ids, attention_mask=inputs.attention_mask,
                position_ids=inputs.position_ids, use_cache=True,
            ).past_key_values  # fmt: skip
        tokens = building.next_tokens(work, args.device)
        made = (model, prompt, inputs, tokens, work.new_tokens)
        captures = out["captures"]
        captures["DynamicDecode"] = _capture(g.DynamicDecode, made, args)
        if args.static or "graph_ms" not in captures["DynamicDecode"]:
            captures["StaticDecode"] = _capture(g.StaticDecode, made, args)
    return out


def _capture(kind, made, args) -> dict:
    """One decode: run uncaptured (its bare time), its host syncs, then captured and replayed."""
    from benchmarks import model_decode_graph as g

    row: dict = {"what": kind.what}
    try:
        decode = kind(*made)
        decode.prepare()
        decode.run()  # warm-up
        row["uncaptured_ms"] = g.timed_ms(decode.run, decode.prepare, args.device, args.repeat)
    except Exception as exc:  # the rest still runs: said in the table
        row["failed"] = f"uncaptured run: {type(exc).__name__}: {exc}"[:400]
        return row
    if args.device != "cuda":
        row["failed"] = "not captured: CUDA graphs need a GPU"
        return row
    try:
        row["syncs_uncaptured"] = g.host_syncs(decode)
        row["graph_ms"], graph = g.graph_ms(decode, args.replays)
        del graph
    except Exception as exc:
        row["failed"] = f"capture: {type(exc).__name__}: {str(exc).splitlines()[0]}"[:400]
        if broken := g.cuda_usable():
            row["failed"] += f"; {broken}"
    return row


def child(args, part: str, implementation: str = "") -> dict:
    """Run one part in a fresh process; its JSON, or why it gave none."""
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        command = [sys.executable, __file__, "--part", part, "--result", result.name,
                   "--implementation", implementation, *_shared(args)]  # fmt: skip
        began = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"failed": f"{part} {implementation}: over {TIMEOUT_S} s"}
        took = time.perf_counter() - began
        print(f"{part} {implementation or 'all'}: {took:.1f} s (rc {done.returncode})", flush=True)
        text = Path(result.name).read_text()
        if done.returncode or not text:
            return {"failed": f"{part} {implementation}: rc {done.returncode}: "
                              f"{done.stderr.strip()[-600:]}"}  # fmt: skip
        return json.loads(text)


def _shared(args) -> list[str]:
    shared = ["--preset", args.preset, "--device", args.device, "--steps", str(args.steps),
              "--repeat", str(args.repeat), "--replays", str(args.replays), "--new-tokens",
              str(args.new_tokens), "--implementations", args.implementations]  # fmt: skip
    if args.static:
        shared.append("--static")
    if args.seq_len:
        shared += ["--seq-len", str(args.seq_len)]
    if args.lengths:
        shared += ["--lengths", args.lengths]
    return shared


def _ms(value) -> str:
    return "" if value is None else f"{value:.2f}"


def _ratio(top, bottom) -> str:
    return f"{top / bottom:.3f}" if top and bottom else ""  # a CPU run: no GPU span


def table(profiled: dict, graphs: dict[str, dict]) -> str:
    """The bar's table (ms per step), the cross-checks, and every failure's reason."""
    from benchmarks.model_decode_graph import median

    lines = [
        "| implementation | model_step ms (CPU span) | GPU span ms (trace) | busy ms (trace) | "
        "work sum ms | work items | idle % of span | bare ms (events) | bare ms (app, after "
        "profiler) | graph ms (dynamic) | graph ms (static) | busy / graph | (graph − busy) / "
        "item µs | span / bare |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    checks = ["| implementation | ran | bare ms | uncaptured dynamic ms | uncaptured static ms |",
              "|---|---|---|---|---|"]  # fmt: skip
    notes = []
    for name, graph in graphs.items():
        seen = profiled.get(name, {"failed": profiled.get("failed", "no profiled run")})
        rows = seen.get("steps", [])
        cpu, span, busy, total = (
            median([r[key] / 1e3 for r in rows])
            for key in ("step_us", "span_us", "busy_us", "work_sum_us")
        )
        items = median([r["work_items"] for r in rows])
        captures = graph.get("captures", {})
        dyn, sta = (median(captures.get(k, {}).get("graph_ms", [])) for k in
                    ("DynamicDecode", "StaticDecode"))  # fmt: skip
        replay = dyn if dyn is not None else sta
        bare = median(graph.get("bare_ms", []))
        idle = f"{100 * (1 - busy / span):.1f}" if busy is not None and span else ""
        per_item = (f"{1e3 * (replay - busy) / items:.2f}"
                    if None not in (replay, busy) and items else "")  # fmt: skip
        count = "" if items is None else f"{items:.0f}"
        lines.append(
            f"| {name} | {_ms(cpu)} | {_ms(span)} | {_ms(busy)} | {_ms(total)} | {count} | "
            f"{idle} | {_ms(bare)} | {_ms(seen.get('app_bare_ms'))} | {_ms(dyn)} | {_ms(sta)} | "
            f"{_ratio(busy, replay)} | {per_item} | {_ratio(span, bare)} |"
        )
        uncaptured = [median(captures.get(k, {}).get("uncaptured_ms", []))
                      for k in ("DynamicDecode", "StaticDecode")]  # fmt: skip
        checks.append(f"| {name} | {graph.get('ran', seen.get('ran', ''))} | {_ms(bare)} | "
                      f"{_ms(uncaptured[0])} | {_ms(uncaptured[1])} |")  # fmt: skip
        for part, text in (("profiled", seen.get("failed")), ("bare/graph", graph.get("failed"))):
            if text:
                notes.append(f"- {name} {part}: {text}")
        for kind, row in captures.items():
            said = row.get("failed") or f"captured: {row['what']}"
            syncs = row.get("syncs_uncaptured")
            notes.append(f"- {name} {kind}: {said}" + (f"; host syncs uncaptured at "
                         f"{', '.join(syncs[:6])}" if syncs else ""))  # fmt: skip
    return "\n".join([*lines, "", *checks, "", *notes]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="llama-3.1-8b")
    parser.add_argument("--implementations", default=IMPLEMENTATIONS)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--lengths")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps (the app's)")
    parser.add_argument("--repeat", type=int, default=5, help="bare timings")
    parser.add_argument("--replays", type=int, default=20, help="graph replays")
    parser.add_argument(
        "--static", action="store_true", help="the StaticCache decode too, not only as fallback"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--part", choices=("profiled", "graph"), help=argparse.SUPPRESS)
    parser.add_argument("--implementation", default="", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:  # a child: one part, its JSON written where the parent reads it
        found = profiled_part(args) if args.part == "profiled" else graph_part(args)
        args.result.write_text(json.dumps(found, default=str))
        return 0
    profiled = child(args, "profiled")
    graphs = {name: child(args, "graph", name) for name in args.implementations.split(",")}
    text = table(profiled, graphs)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "decode-busy.md").write_text(text)
        found = {"profiled": profiled, "graphs": graphs, "args": vars(args)}
        (args.out / "decode-busy.json").write_text(json.dumps(found, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
