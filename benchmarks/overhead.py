"""What the app adds on top of the post's bare script, for one warm run (issue #7).

    python benchmarks/overhead.py --variant sdpa-flash --out "$OUT"

Bare: what 04_c does — inputs, 3 warm-up calls, profile 5 steps (wait=1, warmup=1, active=3)
with record_function("attn_fwd"), export the Chrome trace as .json.gz and the key_averages
table as .txt. Also timed: the same bare script as a fresh process (`python -c ...`), which is
what a user of the post's scripts waits for. App: profiling.runner.run (validation,
memory check, warm-up, profile, export .json/.json.gz/.txt, float64 reference, trace parse,
tables, summary) plus the Gantt figure. Both warm (one untimed run first), median of N runs.
With pyinstrument importable, the app's run is also profiled and its top frames written out.
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
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from profiling.config import RunConfig, resolve_device
from profiling.gantt import build_gantt
from profiling.runner import run

BACKENDS = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-math": SDPBackend.MATH,
}


def bare(config: RunConfig, device: str, out: Path) -> float:
    """The post's script, timed from input creation to the exported trace."""
    began = time.perf_counter()
    shape = (config.batch, config.heads, config.seq_len, config.head_dim)
    q, k, v = (torch.randn(shape, device=device, dtype=config.torch_dtype) for _ in range(3))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad(), sdpa_kernel(BACKENDS[config.variant]):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3)) as p:
            for _ in range(5):
                with record_function("attn_fwd"):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
                p.step()
            if device == "cuda":
                torch.cuda.synchronize()
    p.export_chrome_trace(str(out / "bare.json.gz"))
    sort_by = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    (out / "bare.txt").write_text(p.key_averages().table(sort_by=sort_by, row_limit=15))
    return time.perf_counter() - began


def bare_process(config: RunConfig, device: str, out: Path) -> float:
    """The bare script in a fresh interpreter: import torch, CUDA start-up, then `bare`."""
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); sys.path.insert(0, '.');"
        "from pathlib import Path; from overhead import bare; "
        "from profiling.config import RunConfig; "
        f"bare(RunConfig.from_user(**{config.as_dict()!r}), {device!r}, Path({str(out)!r}))"
    )
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - began


def app(config: RunConfig) -> tuple[float, float]:
    """profiling.run end to end plus the figure; returns (total s, of which figure s)."""
    began = time.perf_counter()
    result = run(config, out_dir=tempfile.mkdtemp(prefix="overhead-"))
    fig_began = time.perf_counter()
    build_gantt(result.spans, result.lanes).to_json()
    end = time.perf_counter()
    return end - began, end - fig_began


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--variant", default="sdpa-flash", choices=list(BACKENDS))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", default="overhead-out")
    p.add_argument("--tiny", action="store_true", help="small CPU shape, for a check")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shape = {"batch": 1, "heads": 2, "seq_len": 128, "head_dim": 32, "dtype": "float32"} \
        if args.tiny else {}  # fmt: skip
    config = RunConfig.from_user(variant=args.variant, device=args.device, **shape)
    device = resolve_device(args.device)
    bare(config, device, out), app(config)  # warm both paths
    bare_s = [bare(config, device, out) for _ in range(args.repeats)]
    process_s = [bare_process(config, device, out) for _ in range(2)]
    app_runs = [app(config) for _ in range(args.repeats)]
    app_s = [a for a, _ in app_runs]
    fig_s = [f for _, f in app_runs]
    result = {
        "variant": args.variant, "shape": config.shape_text(), "device": device,
        "bare_s_median": statistics.median(bare_s), "app_s_median": statistics.median(app_s),
        "figure_s_median": statistics.median(fig_s),
        "ratio": statistics.median(app_s) / statistics.median(bare_s),
        "bare_process_s": process_s,
        "ratio_vs_process": statistics.median(app_s) / min(process_s),
        "bare_s": bare_s, "app_s": app_s,
    }  # fmt: skip
    try:
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0005)
        prof.start()
        app(config)
        prof.stop()
        text = prof.output_text(unicode=True, color=False, show_all=False)
        (out / "overhead-pyinstrument.txt").write_text(text)
        result["pyinstrument"] = "overhead-pyinstrument.txt"
    except ImportError:
        result["pyinstrument"] = "not installed"
    (out / "overhead.json").write_text(json.dumps(result, indent=1))
    print(
        f"{args.variant} {config.shape_text()} on {device}: bare {result['bare_s_median']:.3f} s, "
        f"app {result['app_s_median']:.3f} s (figure {result['figure_s_median']:.3f} s), "
        f"ratio {result['ratio']:.2f}×; bare script as a fresh process {min(process_s):.2f} s"
    )


if __name__ == "__main__":
    main()
