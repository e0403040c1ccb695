"""Trace fixtures for the CPU tests, captured on the H200 (issue 22: roles on training and
decode traces, a user trace with recorded shapes and FLOPs for Analyse's roofline, and the
text torch's SDPA checks print when nothing catches it).

    python benchmarks/capture_fixtures.py --out DIR

Writes DIR/h200_<mode>-<variant>_<shape>.json.gz (a run's own trace), DIR/h200_user-*.json.gz
(torch.profiler with record_shapes and with_flops, as a user would run it), DIR/sdpa-stderr.txt
(can_use_*_attention(debug=True) with nothing capturing, run in a child process), and
DIR/fixtures.jsonl (each run's ran / SDPA account).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.run.runner import VariantUnavailable, run
from profiling.workload.spec import Workload

POST = dict(batch=8, heads=16, seq_len=1024, head_dim=64)
DECODE = dict(batch=16, heads=32, kv_heads=8, seq_len=8192, q_len=1, head_dim=128)
RUNS = [
    *[("train", v, POST) for v in ("sdpa-cudnn", "sdpa-efficient", "sdpa-math", "flex",
                                   "compiled-naive", "kernels-local-triton")],
    *[("forward", v, DECODE) for v in ("sdpa-auto", "naive", "kernels-local-triton",
                                       "sdpa-cudnn", "flex")],
]  # fmt: skip

RAW_CHECKS = """
import torch
q = torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float32)
params = torch.backends.cuda.SDPAParams(q, q, q, None, 0.0, True, False)
for check in ("can_use_flash_attention", "can_use_efficient_attention", "can_use_cudnn_attention"):
    print(check, getattr(torch.backends.cuda, check)(params, True), flush=True)
k = torch.randn(2, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
q = torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.bfloat16)
params = torch.backends.cuda.SDPAParams(q, k, k, None, 0.0, True, False)
print("gqa-off", torch.backends.cuda.can_use_flash_attention(params, True), flush=True)
"""


def shape_id(shape: dict) -> str:
    return "_".join(str(shape[key]) for key in ("batch", "heads", "seq_len", "head_dim"))


def user_trace(variant: str, out: Path) -> None:
    """A forward profiled the way a user would: record_shapes and with_flops on."""
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
    mask = torch.ones(1024, 1024, device="cuda", dtype=torch.bool).tril()

    def naive():
        scores = (q @ k.transpose(-2, -1)) * 64**-0.5
        scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1) @ v

    forward = (
        naive
        if variant == "naive"
        else (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    )
    for _ in range(3):
        forward()
    torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=activities, record_shapes=True, with_flops=True) as prof:
        for _ in range(2):
            forward()
        torch.cuda.synchronize()
    path = out / f"h200_user-{variant}_8_16_1024_64_bf16.json"
    prof.export_chrome_trace(str(path))
    subprocess.run(["gzip", "-9", "-f", str(path)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    raw = subprocess.run([sys.executable, "-c", RAW_CHECKS], capture_output=True, text=True)
    (out / "sdpa-stderr.txt").write_text(f"--stdout\n{raw.stdout}--stderr\n{raw.stderr}")
    print(raw.stdout, raw.stderr[-3000:])
    for variant in ("naive", "sdpa"):
        user_trace(variant, out)
    with open(out / "fixtures.jsonl", "w") as log:
        for mode, variant, shape in RUNS:
            workload = Workload.from_user(variant=variant, device="cuda", mode=mode, **shape)
            tag = f"{'decode' if shape is DECODE else mode}-{variant}"
            try:
                result = run(workload, out_dir=out / "runs" / tag)
            except VariantUnavailable as exc:
                log.write(json.dumps({"run": tag, "unavailable": str(exc)}) + "\n")
                continue
            summary = result.summary
            row = {"run": tag, "ran": summary.ran, "sdpa": summary.sdpa_backends}
            log.write(json.dumps(row, default=str) + "\n")
            print(row)
            shutil.copy(result.trace_gz, out / f"h200_{tag}_{shape_id(shape)}_bf16.json.gz")
    shutil.rmtree(out / "runs", ignore_errors=True)


if __name__ == "__main__":
    main()
