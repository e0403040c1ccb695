"""Reading an Nsight Compute report (.ncu-rep) into one row per profiled kernel, in launch order.

The report is read with NVIDIA's own `ncu_report` module (PyPI's `ncu-report`, or the copy
beside ncu in `extras/python`), never by parsing ncu's text. A metric the GPU's architecture
does not have is absent from the report: its column stays empty and it is named in `missing`.
No torch here.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

# column → the ncu metric it reads (the names gh100 has; `ncu --query-metrics --chip gh100`)
METRICS = {
    "ncu_us": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "tensor_pipe_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "grid": "launch__grid_size",
    "block": "launch__block_size",
}
# a value's unit → the factor to the column's unit (µs for time, bytes for bytes)
_TO_COLUMN_UNIT = {
    "ns": 1e-3,
    "nsecond": 1e-3,
    "us": 1.0,
    "usecond": 1.0,
    "ms": 1e3,
    "msecond": 1e3,
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
}
COLUMNS = ["index", "kernel", "demangled", *METRICS]
MODULE_NAME = "ncu_report"
if TYPE_CHECKING:  # pandas is imported after NVIDIA's module (see `main`)
    import pandas as pd


def _no_kernels() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(columns=COLUMNS)


class CountersUnavailable(RuntimeError):
    """Counters cannot be read here; the message says why (shown as it is)."""


@dataclass
class Counters:
    """A counter pass's outcome: the kernels it measured (COLUMNS), or why there are none."""

    kernels: pd.DataFrame = field(default_factory=_no_kernels)
    reason: str = ""  # why no counters (empty when measured)
    missing: list[str] = field(default_factory=list)  # metrics the report does not have
    seconds: float = 0.0  # the whole counter pass: ncu, the child's start-up, the replays
    how: str = ""  # what ncu did (replays, caches, clocks), said beside its figures
    report: Path | None = None

    @property
    def measured(self) -> bool:
        return not self.reason and not self.kernels.empty


def load_module(ncu: str | None = None) -> ModuleType:
    """NVIDIA's ncu_report: installed (pip's ncu-report), else the copy beside `ncu`
    (`<nsight-compute>/extras/python`), else under /opt/nvidia/nsight-compute."""
    try:
        return importlib.import_module(MODULE_NAME)
    except ImportError:
        pass
    for folder in _module_folders(ncu or shutil.which("ncu")):
        if (Path(folder) / f"{MODULE_NAME}.py").is_file():
            sys.path.insert(0, folder)
            try:
                return importlib.import_module(MODULE_NAME)
            except ImportError:
                sys.path.remove(folder)
    raise CountersUnavailable(
        "NVIDIA's ncu_report module is not installed (pip install ncu-report) and no copy was "
        "found beside ncu (extras/python)"
    )


def _module_folders(ncu: str | None) -> list[str]:
    folders = []
    if ncu:
        real = Path(os.path.realpath(ncu)).parent
        folders += [str(real / "extras" / "python"), str(real.parent / "extras" / "python")]
        folders += sorted(glob.glob(str(real.parent / "nsight-compute*" / "extras" / "python")))
    folders += sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)
    return folders


def read_report(path: str | Path, module: ModuleType | None = None) -> Counters:
    """One row per kernel of every range, in the order ncu profiled them; the metrics no
    kernel has are listed in `missing`."""
    ncu_report = module or load_module()
    context = ncu_report.load_report(str(path))
    rows = []
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        for a in range(profiled.num_actions()):
            rows.append(_row(len(rows), profiled.action_by_idx(a), ncu_report))
    import pandas as pd

    frame = pd.DataFrame(rows, columns=COLUMNS)
    missing = [METRICS[c] for c in METRICS if frame.empty or frame[c].isna().all()]
    return Counters(kernels=frame, missing=missing, report=Path(path))


def _row(index: int, action: Any, ncu_report: ModuleType) -> dict[str, Any]:
    row: dict[str, Any] = {
        "index": index,
        "kernel": action.name(),
        "demangled": action.name(ncu_report.IAction.NameBase_DEMANGLED),
    }
    for column, name in METRICS.items():
        row[column] = _value(action.metric_by_name(name))
    return row


def _value(metric: Any) -> float | None:
    """A metric's value in its column's unit; None where the report does not have it."""
    if metric is None:
        return None
    value = float(metric.as_double())
    unit = metric.unit() or ""
    return value * _TO_COLUMN_UNIT.get(unit, 1.0)


def main(argv: list[str]) -> int:
    """`python -m profiling.analysis.counters REPORT [NCU]`: the report's rows as JSON on
    stdout. The runner reads a report through this child: NVIDIA's module loaded into the
    profiled process (torch, CUDA, pyarrow) crashed it on the H200 (a segmentation fault), and
    so did a child that had imported pandas first: here NVIDIA's module is loaded before pandas
    and numpy, as in the probe that read the reports there (docs/results-h200.md)."""
    module = load_module(argv[1] if len(argv) > 1 else None)
    counters = read_report(argv[0], module)
    frame = counters.kernels.astype(object).where(counters.kernels.notna(), None)
    sys.stdout.write(json.dumps({"rows": frame.to_dict("records"), "missing": counters.missing}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
