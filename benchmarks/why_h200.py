"""Issue 22 live on the H200: roles and the per-kernel roofline of four runs, as the CLI prints
them (views_profile.why_text): naive and sdpa-flash at the post's shape, the decode preset's
sdpa-auto, and a naive train step; with each SDPA run's account of torch's checks.

    python benchmarks/why_h200.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.run.runner import run
from profiling.views import profile as views_profile
from profiling.workload.spec import Workload

POST = dict(batch=8, heads=16, seq_len=1024, head_dim=64)
DECODE = dict(batch=16, heads=32, kv_heads=8, seq_len=8192, q_len=1, head_dim=128)
RUNS = [("naive", POST), ("sdpa-flash", POST), ("sdpa-auto", DECODE),
        ("naive", {**POST, "mode": "train"})]  # fmt: skip

if __name__ == "__main__":
    for variant, shape in RUNS:
        workload = Workload.from_user(variant=variant, device="cuda", dtype="bfloat16", **shape)
        result = run(workload, out_dir=tempfile.mkdtemp())
        print("==", variant, shape, result.summary.ran, result.summary.sdpa_backends)
        print(views_profile.why_text(result))
