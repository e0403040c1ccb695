"""Runs for the store's tests, made from a fixture trace in microseconds (no profiler): the
store keeps plain data, so a RunData with a Summary-shaped dict is what the app hands it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.spread import step_spread
from profiling.store import Store
from profiling.store.rows import RunData

FIXTURES = Path(__file__).parents[1] / "fixtures"
TRACE = FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
OTHER_TRACE = FIXTURES / "naive_8_16_1024_64_bf16.json.gz"
CONFIG = {"variant": "sdpa-math", "seq_len": 1024, "dtype": "bfloat16", "batch": 8,
          "heads": 16, "head_dim": 64, "causal": True, "device": "cuda", "steps": 3,
          "mode": "forward", "kv_heads": None, "q_len": None, "window": None,
          "timing": "eager"}  # fmt: skip


def summary(gpu_us: float = 500.0, spread: float = 5.0, device: str = "NVIDIA H200") -> dict:
    """The Summary fields the store's columns read (the rest of a Summary is kept as given)."""
    steps = step_spread([80.0] * 3, [gpu_us - 2 * spread, gpu_us, gpu_us + 2 * spread])
    return {
        "variant": CONFIG["variant"], "label": "SDPA · math backend", "config": CONFIG,
        "memcpy_per_forward": 0.0, "memset_per_forward": 0.0, "cpu_bound": False,
        "flops_per_forward": 2.2e10, "tflops_basis": "GPU time", "rel_err_note": "",
        "dominant_kernel": "softmax_warp_forward", "dominant_decoded": "softmax",
        "device": "cuda", "device_name": device,
        "torch_version": "2.11.0", "ran": "SDPA math", "forwards": 3,
        "gpu_us_per_forward": gpu_us, "cpu_us_per_forward": 80.0, "kernels_per_forward": 9.0,
        "tflops": 123.4, "peak_mib": 2048.0, "rel_err": 1e-3, "mode": "forward",
        "step_spread": steps,
        "gpu_clocks": {"available": True, "samples": 9, "sm_mhz_min": 1980, "sm_mhz_max": 1980,
                       "sm_mhz_device_max": 1980, "mem_mhz_min": 3201, "mem_mhz_max": 3201,
                       "power_w_mean": 400.0, "power_w_max": 450.0, "temp_c_max": 50,
                       "reasons": [], "throttled": [], "warning": None},
        "machine": {"compute_capability": "9.0", "device_memory_gib": 139.8, "gpu_count": 1,
                    "driver_version": "570.1", "cuda_version": "12.8", "triton_version": "3.5"},
        "phases": [{"phase": "attn_fwd", "gpu_us_per_forward": gpu_us, "cpu_us": 80.0,
                    "spread": steps}],
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
