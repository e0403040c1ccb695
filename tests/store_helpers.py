"""Runs for the store's tests, made from a fixture trace in microseconds (no profiler): the
store keeps plain data, so a RunData with a Summary-shaped dict is what the app hands it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from profiling.store import Store
from profiling.store.rows import RunData

FIXTURES = Path(__file__).parent / "fixtures"
TRACE = FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
OTHER_TRACE = FIXTURES / "naive_8_16_1024_64_bf16.json.gz"
CONFIG = {"variant": "sdpa-math", "seq_len": 1024, "dtype": "bfloat16", "batch": 8,
          "heads": 16, "head_dim": 64, "causal": True, "device": "cuda", "steps": 3,
          "mode": "forward", "kv_heads": None, "q_len": None, "window": None,
          "timing": "eager"}  # fmt: skip


def summary(gpu_us: float = 500.0, spread: float = 5.0, device: str = "NVIDIA H200") -> dict:
    """The Summary fields the store's columns read (the rest of a Summary is kept as given)."""
    steps = {"median": gpu_us, "q1": gpu_us - spread, "q3": gpu_us + spread}
    return {
        "variant": CONFIG["variant"], "device": "cuda", "device_name": device,
        "torch_version": "2.11.0", "ran": "SDPA math", "forwards": 3,
        "gpu_us_per_forward": gpu_us, "cpu_us_per_forward": 80.0, "kernels_per_forward": 9.0,
        "tflops": 123.4, "peak_mib": 2048.0, "rel_err": 1e-3, "mode": "forward",
        "step_spread": {"gpu_us": steps, "cpu_us": {"median": 80.0, "q1": 79.0, "q3": 81.0}},
        "gpu_clocks": {"available": True, "sm_mhz_min": 1980, "sm_mhz_max": 1980,
                       "throttled": [], "warning": None},
        "machine": {"compute_capability": "9.0", "device_memory_gib": 139.8, "gpu_count": 1,
                    "driver_version": "570.1", "cuda_version": "12.8", "triton_version": "3.5"},
        "phases": [{"phase": "attn_fwd", "gpu_us_per_forward": gpu_us, "cpu_us": 80.0,
                    "spread": {"gpu_us": steps}}],
    }  # fmt: skip


def run_data(trace: Path | None = TRACE, gpu_us: float = 500.0, **config: Any) -> RunData:
    kernels = pd.DataFrame({"kernel": ["k1", "k2"], "count": [1.0, 2.0], "total_us": [3.0, 4.0]})
    return RunData(
        kind="profile", origin="test", config={**CONFIG, **config}, status="ok",
        summary=summary(gpu_us), kernels=kernels, trace_gz=trace,
    )  # fmt: skip


def count(store: Store, table: str = "runs") -> int:
    import sqlite3

    with sqlite3.connect(store.path) as connection:
        return connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
