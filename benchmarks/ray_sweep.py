"""Issue 35: one sweep on a local Ray cluster (one worker per visible GPU) and serially, and the
speed-up; per point, whether the two runs' GPU µs agree within the points' spread.

    python3 benchmarks/ray_sweep.py --points 8 --out DIR            # the H200 (1 GPU) check
    python3 benchmarks/ray_sweep.py --points 16 --out DIR           # 2, 4, 8 GPUs: the speed-up
    python3 benchmarks/ray_sweep.py --device cpu --workers 2 --points 6 --out DIR   # here

Targets: on 1 GPU, Ray no slower than 1.1× serial and every point's GPU µs within its spread;
on 2 GPUs a speed-up ≥ 1.8×, on 4 ≥ 3.5×. Ray runs first, from a driver that has not touched
the GPU, and is shut down before the serial sweep, so no two processes hold one GPU. The Ray
time counts its workers' start (each imports torch and starts CUDA); the serial one counts
CUDA's start in this process. The cluster's own start (ray.init; `ray start --head` does it
once for many sweeps) is reported beside, not in the speed-up. Writes DIR/ray_sweep.json and
DIR/ray_sweep.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray

from profiling.jobs.ray import RayExecutor
from profiling.jobs.sweep import SweepResult, sweep
from profiling.run.runner import quiet_profiler_logs
from profiling.workload.spec import resolve_device

# no Hub download and no Triton build of ours; flex compiles once per chain, serial or not
GPU_VARIANTS = ["naive", "naive-inplace", "sdpa-auto", "sdpa-math", "sdpa-flash",
                "sdpa-efficient", "sdpa-cudnn", "flex"]  # fmt: skip
CPU_VARIANTS = ["naive", "naive-inplace", "sdpa-auto", "sdpa-math", "sdpa-flash"]
GPU_SHAPE = dict(batch=8, heads=16, head_dim=64, dtype="bfloat16", device="cuda")
CPU_SHAPE = dict(batch=1, heads=2, head_dim=32, dtype="float32", device="cpu")


def plan(points: int, device: str) -> tuple[list[str], list[int]]:
    """Variants × two lengths = `points` (an even number): one chain per variant, so many
    chains keep many GPUs busy."""
    pool = GPU_VARIANTS if device == "cuda" else CPU_VARIANTS
    lengths = [1024, 2048] if device == "cuda" else [64, 128]
    count = max(1, points // len(lengths))
    if count > len(pool):
        raise SystemExit(f"at most {len(lengths) * len(pool)} points on {device}")
    return pool[:count], lengths


def timed_sweep(variants, lengths, out: Path, shape: dict, steps: int, executor=None):
    began = time.perf_counter()
    result = sweep(variants, lengths, out_dir=out, executor=executor, steps=steps, **shape)
    return result, time.perf_counter() - began


def spreads(result: SweepResult) -> dict[tuple[str, int], dict[str, Any]]:
    """Each point's median and IQR of GPU (else CPU) µs per step, from its .run.json."""
    basis = "gpu_us" if result.device == "cuda" else "cpu_us"
    found = {}
    for point in result.points:
        if point.trace_gz is None:
            continue
        stem = point.trace_gz.name.removesuffix(".json.gz")
        doc = json.loads(point.trace_gz.with_name(stem + ".run.json").read_text())
        found[(point.variant, point.seq_len)] = doc["summary"]["step_spread"].get(basis)
    return found


def agreement(serial: SweepResult, on_ray: SweepResult) -> list[dict[str, Any]]:
    """Per point: both medians, and whether they differ by at most the larger IQR."""
    ours, theirs = spreads(on_ray), spreads(serial)
    rows = []
    for key, alone in theirs.items():
        other = ours.get(key)
        if not alone or not other:
            continue
        width = max(alone["q3"] - alone["q1"], other["q3"] - other["q1"])
        delta = other["median"] - alone["median"]
        rows.append({"variant": key[0], "seq_len": key[1], "serial µs": alone["median"],
                     "ray µs": other["median"], "Δ %": 100 * delta / alone["median"],
                     "larger IQR µs": width, "within": abs(delta) <= width})  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    parser.add_argument("--workers", type=int, default=None, help="CPU: workers (default all)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    quiet_profiler_logs()
    device = resolve_device(args.device)
    shape = GPU_SHAPE if device == "cuda" else CPU_SHAPE
    variants, lengths = plan(args.points, device)
    out = Path(args.out)
    began = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False,
             **({} if device == "cuda" else {"num_cpus": args.workers}))  # fmt: skip
    started = time.perf_counter() - began
    executor = RayExecutor(None, workers=args.workers)
    on_ray, ray_s = timed_sweep(variants, lengths, out / "ray", shape, args.steps, executor)
    # the same sweep again on the warm workers: what the page's long-lived executor pays
    _, warm_s = timed_sweep(variants, lengths, out / "ray-warm", shape, args.steps, executor)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    executor.close()
    ray.shutdown()
    serial, serial_s = timed_sweep(variants, lengths, out / "serial", shape, args.steps)
    # a second serial sweep: how far two serial runs of a point differ (run-to-run drift)
    again, _ = timed_sweep(variants, lengths, out / "serial-again", shape, args.steps)
    report = summarize(args, device, gpus, serial, on_ray, serial_s, ray_s, started)
    report["ray_warm_s"] = warm_s
    report["speedup_warm"] = serial_s / warm_s
    drift = agreement(serial, again)
    report["serial_vs_serial_within_spread"] = sum(row["within"] for row in drift)
    report["max_abs_delta_pct"] = max(abs(row["Δ %"]) for row in report["per_point"])
    report["serial_max_abs_delta_pct"] = max(abs(row["Δ %"]) for row in drift)
    print(markdown(report))
    print(
        f"warm workers: Ray {warm_s:.1f} s against serial {serial_s:.1f} s "
        f"({report['speedup_warm']:.2f}×); largest |Δ| Ray vs serial "
        f"{report['max_abs_delta_pct']:.1f}%, serial vs serial "
        f"{report['serial_max_abs_delta_pct']:.1f}% "
        f"({report['serial_vs_serial_within_spread']}/{len(drift)} within the spread)"
    )
    (out / "ray_sweep.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "ray_sweep.md").write_text(markdown(report))
    return 0


def summarize(args, device, gpus, serial, on_ray, serial_s, ray_s, init_s) -> dict[str, Any]:
    untimed = ["GPU µs/fwd", "CPU µs/fwd", "TFLOP/s", "peak MiB", "reason"]
    same = serial.table.drop(columns=untimed).equals(on_ray.table.drop(columns=untimed))
    rows = agreement(serial, on_ray)
    workers = gpus if device == "cuda" else (args.workers or "all CPUs")
    return {
        "device": serial.device_name, "gpus": gpus, "workers": workers,
        "points": len(serial.points), "steps": args.steps, "shape": serial.shape,
        "serial_s": serial_s, "ray_s": ray_s, "ray_init_s": init_s,
        "speedup": serial_s / ray_s, "speedup_with_cluster_start": serial_s / (ray_s + init_s),
        "tables_equal_but_timings": same,
        "points_within_spread": sum(row["within"] for row in rows), "points_compared": len(rows),
        "per_point": rows,
        "statuses": serial.table["status"].value_counts().to_dict(),
    }  # fmt: skip


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"{report['points']} points on {report['device']} ({report['workers']} Ray workers, "
        f"{report['steps']} steps each)",
        f"serial {report['serial_s']:.1f} s · Ray {report['ray_s']:.1f} s on a started cluster "
        f"(its workers' start included) · speed-up {report['speedup']:.2f}×; with the "
        f"cluster's start ({report['ray_init_s']:.1f} s): "
        f"{report['speedup_with_cluster_start']:.2f}×",
        f"tables equal but timings: {report['tables_equal_but_timings']} · points within "
        f"their spread: {report['points_within_spread']}/{report['points_compared']}",
        "",
        "| variant | S | serial µs | Ray µs | Δ % | larger IQR µs | within |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["per_point"]:
        lines.append(
            f"| {row['variant']} | {row['seq_len']} | {row['serial µs']:.1f} | "
            f"{row['ray µs']:.1f} | {row['Δ %']:+.1f} | {row['larger IQR µs']:.1f} | "
            f"{row['within']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
