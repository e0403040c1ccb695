"""Figures split by where their points ran, by the tables' rule (profiling/jobs/executor.py,
ran_on_texts): on a cluster of more than one GPU model a table gets a `ran on` column (host ·
GPU), and a figure draws one series per variant and `ran on` value, the device named in its
legend and hover. Without the column (one device, or a serial run) nothing splits and the
figures are what they were before Ray, trace for trace.

No plotly here: the figure modules ask these helpers how to split, and draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from profiling.jobs.executor import RAN_ON, Placement, ran_on_texts

# one marker shape per device, the same in every figure of a job (a variant keeps its colour)
DEVICE_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star", "hexagon")


def by_device(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """`rows` grouped by where they ran, in the order met; one group named "" when the table
    does not split (no `ran on` column), so a caller draws exactly one series as before."""
    if RAN_ON not in rows:
        return [("", rows)]
    return [(str(device), group) for device, group in rows.groupby(RAN_ON, sort=False)]


def devices_of(rows: pd.DataFrame) -> list[str]:
    """Where each row ran, "" for each when the table does not split (or the row never ran)."""
    if RAN_ON not in rows:
        return [""] * len(rows)
    return [str(device) for device in rows[RAN_ON]]


def device_symbols(table: pd.DataFrame) -> dict[str, str]:
    """Each device of the table its marker shape; {} when the table does not split."""
    if RAN_ON not in table:
        return {}
    devices = [d for d in dict.fromkeys(table[RAN_ON].astype(str)) if d]
    return {d: DEVICE_SYMBOLS[i % len(DEVICE_SYMBOLS)] for i, d in enumerate(devices)}


def on_device(what: str, device: str) -> str:
    """A series' name: `what` alone, or with the device it ran on."""
    return f"{what} · on {device}" if device else what


def device_marker(symbols: dict[str, str], device: str) -> dict[str, Any]:
    """The keyword a split series adds (its device's marker); none when nothing splits, so an
    unsplit figure's JSON stays as it was."""
    return {"marker": {"symbol": symbols[device]}} if device in symbols else {}


def run_devices(placements: Sequence[Placement | None]) -> list[str]:
    """Each run's `ran on` text by the tables' rule, "" for each when they do not split."""
    return ran_on_texts(placements) or [""] * len(placements)
