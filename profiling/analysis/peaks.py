"""Datasheet peaks per GPU model, TFLOP/s and memory TB/s: what "% of peak" is measured against.

Plain data (no torch): the page shows the table itself, so the source of every figure is on
screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Peak:
    """Dense (no sparsity) peak TFLOP/s of one GPU model, as NVIDIA's datasheet states it."""

    device: str
    tflops: dict[str, float]  # dtype → dense TFLOP/s; a dtype left out has no tensor-core peak
    source: str
    bandwidth_tbps: float | None = None  # memory bandwidth, TB/s (10¹² bytes/s), datasheet


# Name patterns as torch.cuda.get_device_name() spells them ("NVIDIA H200", "NVIDIA H100 80GB
# HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L4", "Tesla T4"), first match wins. float32 is the
# FP32 (non-tensor-core) peak: PyTorch's default matmul precision does not use TF32; "tf32" is
# the TF32 tensor-core peak (a float32 matmul under allow_tf32 / "high" precision). Dense =
# half of the datasheet's "with sparsity" tensor figure. Left out on purpose: A10G (AWS's part;
# NVIDIA publishes no datasheet for it), H100 NVL and H200 NVL (lower clocks, other figures).
PEAKS: list[tuple[re.Pattern[str], Peak]] = [
    (re.compile(r"\bH200\b(?!.*\bNVL\b)"),
     Peak("H200 SXM", {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7, "float32": 67.0},
          "NVIDIA H200 datasheet (BF16/FP16 1,979 with sparsity → 989.4 dense; TF32 989 with"
          " sparsity → 494.7 dense; FP32 67);"
          " HBM3e 4.8 TB/s", 4.8)),
    (re.compile(r"\bH100\b.*\bPCIe\b", re.I),
     Peak("H100 PCIe", {"bfloat16": 756.0, "float16": 756.0, "tf32": 378.0, "float32": 51.0},
          "NVIDIA H100 datasheet, PCIe (BF16/FP16 1,513 with sparsity → 756 dense; TF32 756"
          " with sparsity → 378 dense; FP32 51);"
          " HBM2e 2.0 TB/s", 2.0)),
    (re.compile(r"\bH100\b(?!.*\bNVL\b).*(\bSXM|\bHBM3\b)"),
     Peak("H100 SXM", {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7, "float32": 67.0},
          "NVIDIA H100 datasheet, SXM (BF16/FP16 1,979 with sparsity → 989.4 dense; TF32 989"
          " with sparsity → 494.7 dense; FP32 67);"
          " HBM3 3.35 TB/s", 3.35)),
    (re.compile(r"\bA100\b"),
     Peak("A100", {"bfloat16": 312.0, "float16": 312.0, "tf32": 156.0, "float32": 19.5},
          "NVIDIA A100 datasheet (BF16/FP16 tensor 312 dense; TF32 156 dense; FP32 19.5);"
          " HBM2 1.555 TB/s (40GB; the 80GB SXM reads 2.039)", 1.555)),
    (re.compile(r"\bL40S\b"),
     Peak("L40S", {"bfloat16": 362.05, "float16": 362.05, "tf32": 183.0, "float32": 91.6},
          "NVIDIA L40S datasheet (BF16/FP16 tensor 362.05 dense; TF32 183 dense, 366 with"
          " sparsity; FP32 91.6);"
          " GDDR6 864 GB/s", 0.864)),
    (re.compile(r"\bL4\b"),
     Peak("L4", {"bfloat16": 121.0, "float16": 121.0, "tf32": 60.0, "float32": 30.3},
          "NVIDIA L4 datasheet (BF16/FP16 242 with sparsity → 121 dense; TF32 120 with"
          " sparsity → 60 dense; FP32 30.3);"
          " GDDR6 300 GB/s", 0.3)),
    (re.compile(r"\bA10\b"),
     Peak("A10", {"bfloat16": 125.0, "float16": 125.0, "tf32": 62.5, "float32": 31.2},
          "NVIDIA A10 datasheet (BF16/FP16 tensor 125 dense; TF32 62.5 dense, 125 with"
          " sparsity; FP32 31.2);"
          " GDDR6 600 GB/s", 0.6)),
    (re.compile(r"\bT4\b"),
     Peak("T4", {"float16": 65.0, "float32": 8.1},
          "NVIDIA T4 datasheet (FP16 tensor 65; FP32 8.1; no bf16 or tf32 tensor cores);"
          " GDDR6 320 GB/s", 0.32)),
]  # fmt: skip


def peak_entry(device_name: str) -> Peak | None:
    """The datasheet row for a device name, or None when the model is not in the table."""
    for pattern, peak in PEAKS:
        if pattern.search(device_name or ""):
            return peak
    return None


def peak_bandwidth(device_name: str) -> float | None:
    """Datasheet memory bandwidth in TB/s for a device; None when unknown."""
    peak = peak_entry(device_name)
    return peak.bandwidth_tbps if peak else None


def peak_tflops(device_name: str, dtype: str) -> float | None:
    """Datasheet dense peak for (device, dtype); None when unknown (then no "% of peak")."""
    peak = peak_entry(device_name)
    return peak.tflops.get(dtype) if peak else None


def peaks_table() -> pd.DataFrame:
    """The datasheet table as the page shows it (so the source is on screen, not hidden)."""
    rows = [
        {
            "device": peak.device,
            **{f"{dtype} TFLOP/s": tflops for dtype, tflops in peak.tflops.items()},
            "memory TB/s": peak.bandwidth_tbps,
            "source": peak.source,
        }
        for _, peak in PEAKS
    ]
    columns = ["device", "bfloat16 TFLOP/s", "float16 TFLOP/s", "tf32 TFLOP/s", "float32 TFLOP/s",
               "memory TB/s", "source"]  # fmt: skip
    return pd.DataFrame(rows).reindex(columns=columns)


# Each compute ceiling's dtypes and label, in the order a chart draws them
_ROOF_LABELS = (
    (("float32",), "FP32 (CUDA cores)"),
    (("tf32",), "TF32 tensor cores"),
    (("bfloat16", "float16"), "BF16/FP16 tensor cores"),
    (("bfloat16",), "BF16 tensor cores"),
    (("float16",), "FP16 tensor cores"),
)


def _ceilings(device_name: str) -> list[tuple[str, float, tuple[str, ...]]]:
    """(label, dense TFLOP/s, the dtypes it bounds) per compute ceiling of the device: BF16 and
    FP16 share one ceiling where the datasheet gives them the same figure."""
    peak = peak_entry(device_name)
    if peak is None:
        return []
    found: list[tuple[str, float, tuple[str, ...]]] = []
    placed: set[str] = set()
    for dtypes, label in _ROOF_LABELS:
        values = {peak.tflops.get(dtype) for dtype in dtypes}
        if placed.intersection(dtypes) or len(values) != 1 or None in values:
            continue
        found.append((label, values.pop(), dtypes))
        placed.update(dtypes)
    return found


def roofs(device_name: str) -> list[tuple[str, float]]:
    """The device's compute ceilings as (label, dense TFLOP/s): FP32 on CUDA cores, TF32 and
    BF16/FP16 on tensor cores; empty when the model is not in the table. The memory roof is
    `peak_bandwidth(device_name)` TB/s."""
    return [(label, value) for label, value, _ in _ceilings(device_name)]


def roof_label(device_name: str, dtype: str) -> str | None:
    """The label `roofs` gives the ceiling `dtype` runs under (None without a peak for it)."""
    return next((label for label, _, dtypes in _ceilings(device_name) if dtype in dtypes), None)
