"""Datasheet peaks per GPU model, TFLOP/s and memory TB/s: what "% of peak" is measured against.

Plain data (no torch), kept as a data file (peaks.csv): the page shows the table itself, so
the source of every figure is on screen.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Peak:
    """Dense (no sparsity) peak TFLOP/s of one GPU model, as NVIDIA's datasheet states it."""

    device: str
    tflops: dict[str, float]  # dtype → dense TFLOP/s; a dtype left out has no tensor-core peak
    source: str
    bandwidth_tbps: float | None = None  # memory bandwidth, TB/s (10¹² bytes/s), datasheet


# The table is data: peaks.csv beside this module, one row per model, its `pattern` matching
# the names torch.cuda.get_device_name() gives ("NVIDIA H200", "NVIDIA H100 80GB HBM3",
# "NVIDIA A100-SXM4-80GB", "NVIDIA L4", "Tesla T4"; "(?i)": in any case), first match wins.
# float32 is the FP32 (non-tensor-core) peak: PyTorch's default matmul precision does not use
# TF32; "tf32" is the TF32 tensor-core peak (a float32 matmul under allow_tf32 / "high"
# precision). Dense = half of the datasheet's "with sparsity" tensor figure. An empty cell: no
# tensor-core peak for that dtype. Left out on purpose: A10G (AWS's part; NVIDIA publishes no
# datasheet for it), H100 NVL and H200 NVL (lower clocks, other figures).
DATASHEET = Path(__file__).with_name("peaks.csv")
DTYPES = ("bfloat16", "float16", "tf32", "float32")  # the file's TFLOP/s columns, in order


def read_peaks(path: Path = DATASHEET) -> list[tuple[re.Pattern[str], Peak]]:
    """The datasheet file's rows, in its order, each with its compiled name pattern."""
    with path.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    return [
        (
            re.compile(row["pattern"]),
            Peak(
                row["device"],
                {dtype: float(row[dtype]) for dtype in DTYPES if row[dtype]},
                row["source"],
                float(row["memory TB/s"]) if row["memory TB/s"] else None,
            ),
        )
        for row in rows
    ]


PEAKS = read_peaks()


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
    columns = ["device", *(f"{dtype} TFLOP/s" for dtype in DTYPES), "memory TB/s", "source"]
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
