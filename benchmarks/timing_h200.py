"""Issue 23 on the H200: eager vs CUDA-graph vs cold-L2 for the post's six at the post's shape,
with the clocks each run read; cold vs warm on a decode whose K/V fit in the L2; and the memory
timelines of naive vs sdpa-flash (forward and a training step), with their snapshots.

    python3 benchmarks/timing_h200.py --out DIR [--steps 10]

Writes DIR/timing.json (every run's figures), DIR/timing.md (the tables for
docs/results-h200.md) and DIR/<variant>_<mode>.memory.pickle (the snapshots; the PNGs are
drawn from them on a machine with Chromium: benchmarks/render_timeline.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attention import VARIANTS
from benchmarks.shapes import SHAPES
from profiling.run.runner import RunError, VariantUnavailable, run
from profiling.workload.spec import TIMINGS, Workload

POST_SIX = [v.id for v in VARIANTS.values() if v.compare_default == "always"]
DECODE_IN_L2 = dict(batch=8, heads=32, kv_heads=8, q_len=1, seq_len=1024, head_dim=128)


def one(out: Path, **fields: Any) -> dict[str, Any]:
    """One run's row: the per-step spread, the clocks, the memory peak (or why it did not run)."""
    workload = Workload.from_user(device="cuda", **fields)
    row: dict[str, Any] = {"variant": workload.variant, "timing": workload.timing,
                           "mode": workload.mode, "shape": workload.shape_text()}  # fmt: skip
    try:
        result = run(workload, out_dir=out / f"{workload.variant}_{workload.timing}")
    except (VariantUnavailable, RunError) as exc:
        return {**row, "status": type(exc).__name__, "reason": str(exc)}
    summary = result.summary
    row.update(
        status="ok",
        kernels=summary.kernels_per_forward,
        spread=summary.step_spread,
        phases={p["phase"]: p.get("spread") for p in summary.phases},
        compared=summary.launch_compare,
        clocks=summary.gpu_clocks,
        memory={k: v for k, v in (summary.memory or {}).items() if k != "breakdown"},
        breakdown=(summary.memory or {}).get("breakdown"),
        notes=summary.notes,
        snapshot=str(result.memory_snapshot) if result.memory_snapshot else None,
        trace=str(result.trace_gz),
    )
    return row


def _iqr(spread: dict | None) -> str:
    if not spread:
        return "n/a"
    return f"{spread['median']:,.1f} ({spread['q1']:,.1f}–{spread['q3']:,.1f})"


def _clocks(clocks: dict | None) -> str:
    if not clocks or not clocks.get("available"):
        return (clocks or {}).get("reason", "n/a")
    power = clocks.get("power_w_max")
    text = f"SM {clocks['sm_mhz_min']}–{clocks['sm_mhz_max']} MHz, mem {clocks['mem_mhz_max']}"
    text += f" MHz, ≤{power:.0f} W" if power else " MHz"
    text += f", {clocks.get('temp_c_max')} °C"
    if clocks.get("throttled"):
        text += ", throttled: " + ", ".join(clocks["throttled"])
    return text


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| variant | timing | GPU µs/step median (IQR) | CPU µs/step median (IQR) | kernels/step "
        "| host µs to issue a step: eager → graph | clocks during the steps |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row["status"] != "ok":
            lines.append(f"| {row['variant']} | {row['timing']} | {row['status']}: "
                         f"{row['reason'][:140]} | | | | |")  # fmt: skip
            continue
        compared = row.get("compared")
        issue = "—"
        if compared:
            issue = (f"{compared['eager']['host_us']['median']:.1f} → "
                     f"{compared['cuda-graph']['host_us']['median']:.1f}")  # fmt: skip
        lines.append(
            f"| {row['variant']} | {row['timing']} | {_iqr(row['spread'].get('gpu_us'))} | "
            f"{_iqr(row['spread'].get('cpu_us'))} | {row['kernels']:.0f} | {issue} | "
            f"{_clocks(row['clocks'])} |"
        )
    return "\n".join(lines)


def memory_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| variant | mode | timeline peak MiB | max_memory_allocated MiB | ratio |",
             "|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        memory = row.get("memory") or {}
        if "peak_mib" in memory:
            ratio = memory["peak_mib"] / memory["max_memory_allocated_mib"]
            lines.append(f"| {row['variant']} | {row['mode']} | {memory['peak_mib']:,.1f} | "
                         f"{memory['max_memory_allocated_mib']:,.1f} | {ratio:.4f} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--variants", default=",".join(POST_SIX))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = Path("/tmp/timing-runs")  # the traces stay on the machine; two come back
    post = [
        one(runs, variant=name, timing=timing, steps=args.steps, **SHAPES["post"])
        for name in args.variants.split(",")
        for timing in TIMINGS
    ]
    decode = [
        one(runs, variant="sdpa-flash", timing=timing, steps=20, **DECODE_IN_L2)
        for timing in ("eager", "cold-l2")
    ]
    memory = [
        one(runs, variant=name, mode=mode, **SHAPES["post"])
        for name in ("naive", "sdpa-flash")
        for mode in ("forward", "train")
    ]
    for row in post:
        if row["variant"] == "sdpa-cudnn" and row["status"] == "ok":
            shutil.copy(row["trace"], args.out / f"sdpa-cudnn_{row['timing']}.json.gz")
    for row in memory:
        if row.get("snapshot"):
            shutil.copy(row["snapshot"], args.out / f"{row['variant']}_{row['mode']}.memory.pickle")
    (args.out / "timing.json").write_text(
        json.dumps({"post": post, "decode": decode, "memory": memory}, indent=1, default=str)
    )
    text = "\n\n".join([
        "### Eager vs CUDA graph vs cold L2 · B8 H16 S1024 D64 bf16 causal, forward", table(post),
        "### Cold vs warm L2 · decode B8 H32/KV8 Q1 S1024 D128 bf16 (K/V: 32 MiB)", table(decode),
        "### Memory timeline peak vs max_memory_allocated", memory_table(memory),
    ])  # fmt: skip
    (args.out / "timing.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
