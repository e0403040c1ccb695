"""What the app adds on top of the post's bare script, for one warm run (issue #7).

    python benchmarks/overhead.py --variant all --out "$OUT"

Bare: what the post's 04_c does — inputs, 3 warm-up calls, profile 5 steps (wait=1, warmup=1,
active=3) with record_function("attn_fwd"), export the Chrome trace as .json.gz, write the
key_averages table and the peak memory as .txt — around the same forward the app runs (the
registry's, so every variant is covered; for SDPA it is F.scaled_dot_product_attention under
sdpa_kernel, as in the post). Also timed once per variant: the bare script as a fresh
process, which is what a user of the post's scripts waits for.

App: everything a Profile click computes before Gradio serialises it — profiling.run.runner.run
(validation, memory check, warm-up, profile, export .json/.json.gz/.txt, float64 reference,
trace parse, operator and kernel tables, summary) plus views_profile.page (launch/idle statistics,
table views, Gantt) and the Gantt's JSON as gr.Plot sends it. The Gantt is
`views_profile.run_figure`, the page's: from the trace the run read once (profiling.run.trace), as
records where it could (`small_trace_path` in overhead.json says whether every run did).

Both warm (untimed runs first), then bare and app alternate, `--repeats` times each, so drift
of the machine hits both alike; medians and minimums are reported. With pyinstrument
importable, one app run per variant is profiled and its top frames written out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attention import VARIANTS
from profiling.run.runner import run
from profiling.views import profile as views_profile
from profiling.workload.spec import Workload, resolve_device

TINY = {"batch": 1, "heads": 2, "seq_len": 128, "head_dim": 32, "dtype": "float32"}  # a CPU check


def bare(config: Workload, device: str, out: Path) -> float:
    """The post's script, timed from input creation to the written .txt."""
    began = time.perf_counter()
    variant = config.spec
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    if variant.layout == "bshd":
        shape = (config.batch, config.seq_len, config.heads, config.head_dim)
    problem = config.problem(device)
    forward = variant.build(problem).forward
    q, k, v = (torch.randn(shape, device=device, dtype=config.torch_dtype) for _ in range(3))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad(), variant.context():
        for _ in range(3):
            forward(q, k, v)
        with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3)) as p:
            for _ in range(5):
                with record_function("attn_fwd"):
                    forward(q, k, v)
                p.step()
            if device == "cuda":
                torch.cuda.synchronize()
    p.export_chrome_trace(str(out / "bare.json.gz"))
    sort_by = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    text = p.key_averages().table(sort_by=sort_by, row_limit=15)
    if device == "cuda":  # the post's scripts print the peak memory too
        text += f"\npeak memory {torch.cuda.max_memory_allocated() / 1024**2:.0f} MiB\n"
    (out / "bare.txt").write_text(text)
    return time.perf_counter() - began


def bare_process(config: Workload, device: str, out: Path) -> float:
    """The bare script in a fresh interpreter: import torch, CUDA start-up, then `bare`."""
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); sys.path.insert(0, '.');"
        "from pathlib import Path; from overhead import bare; "
        "from profiling.workload.spec import Workload; "
        f"bare(Workload.from_user(**{config.as_dict()!r}), {device!r}, Path({str(out)!r}))"
    )
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - began


def app(config: Workload) -> dict[str, float]:
    """A Profile click's computation; seconds in total and for its parts.

    "issue" is the issue's definition (profiling.run plus the Gantt figure and its JSON);
    "total" is the whole click (profiling.run plus views_profile.page, which also computes the
    launch/idle statistics and the table views, plus the figure's JSON). The figure is timed
    once more on its own after the click, outside "total"."""
    began = time.perf_counter()
    result = run(config, out_dir=tempfile.mkdtemp(prefix="overhead-"))
    ran = time.perf_counter()
    page = views_profile.page(result)
    paged = time.perf_counter()
    page.figure.to_json()
    end = time.perf_counter()
    views_profile.run_figure(result, views_profile.run_title(result.summary)).to_json()
    figure = time.perf_counter() - end
    return {"total": end - began, "run": ran - began, "page": paged - ran, "json": end - paged,
            "figure": figure, "issue": ran - began + figure,
            "small": float(result.trace.reader == "records")}  # fmt: skip


def measure(config: Workload, device: str, out: Path, repeats: int) -> dict:
    for _ in range(2):  # warm both paths (autotuners, compilers, allocator, imports)
        bare(config, device, out), app(config)
    bare_s: list[float] = []
    app_runs: list[dict[str, float]] = []
    for _ in range(repeats):
        bare_s.append(bare(config, device, out))
        app_runs.append(app(config))
    app_s = [a["total"] for a in app_runs]
    issue_s = [a["issue"] for a in app_runs]
    part = lambda key: statistics.median(a[key] for a in app_runs)  # noqa: E731
    process_s = bare_process(config, device, out)
    result = {
        "variant": config.variant, "shape": config.shape_text(), "device": device,
        "bare_s_median": statistics.median(bare_s), "bare_s_min": min(bare_s),
        "app_s_median": statistics.median(app_s), "app_s_min": min(app_s),
        "run_s_median": part("run"), "page_s_median": part("page"), "json_s_median": part("json"),
        "figure_s_median": part("figure"),
        "issue_s_median": statistics.median(issue_s), "issue_s_min": min(issue_s),
        "issue_ratio": statistics.median(issue_s) / statistics.median(bare_s),
        "ratio": statistics.median(app_s) / statistics.median(bare_s),
        "ratio_of_minimums": min(app_s) / min(bare_s),
        "bare_process_s": process_s,
        "small_trace_path": all(a["small"] for a in app_runs),
        "bare_s": bare_s, "app_s": app_s,
    }  # fmt: skip
    try:
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0002)
        prof.start()
        app(config)
        prof.stop()
        text = prof.output_text(unicode=True, color=False, show_all=False)
        name = f"pyinstrument-{config.variant}.txt"
        (out / name).write_text(text)
        result["pyinstrument"] = name
    except ImportError:
        result["pyinstrument"] = "not installed"
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--variant", default="all", help="a variant id, a comma list, or all")
    p.add_argument("--repeats", type=int, default=21)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", default="overhead-out")
    p.add_argument("--tiny", action="store_true", help="small CPU shape, for a check")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(args.device)
    shape = TINY if args.tiny else {}
    wanted = list(VARIANTS) if args.variant == "all" else args.variant.split(",")
    results = []
    print("| variant | bare ms (median / min) | run + figure ms | (run + figure) / bare | "
          "whole click ms (median / min) | click / bare | of which run / page / JSON ms | "
          "bare as a fresh process s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for variant in wanted:
        config = Workload.from_user(variant=variant, device=args.device, **shape)
        reason = config.spec.unavailable(device, config.torch_dtype)
        if reason:
            print(f"| {variant} | unavailable: {reason} | | | | | | |")
            continue
        r = measure(config, device, out, args.repeats)
        results.append(r)
        ms = {k: v * 1e3 for k, v in r.items() if k.endswith(("_median", "_min"))}
        print(
            f"| {variant} | {ms['bare_s_median']:.1f} / {ms['bare_s_min']:.1f} | "
            f"{ms['issue_s_median']:.1f} | {r['issue_ratio']:.2f}× | "
            f"{ms['app_s_median']:.1f} / {ms['app_s_min']:.1f} | {r['ratio']:.2f}× | "
            f"{ms['run_s_median']:.1f} / {ms['page_s_median']:.1f} / {ms['json_s_median']:.2f} | "
            f"{r['bare_process_s']:.1f} |",
            flush=True,
        )
    (out / "overhead.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
