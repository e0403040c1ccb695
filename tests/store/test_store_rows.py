"""A run's columns, field by field: every figure History lists is read from its own place in
the Summary and stored under its own column (issue 41: a column fed from the wrong field, or
from none, shows a wrong figure in History and in every trend built on it).

The expected columns are written out here, each figure distinct, so a column swapped with
another or left empty fails on its name."""

from __future__ import annotations

import dataclasses
import json
import socket
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from profiling.store import open_store, query
from profiling.store.connection import StoreError
from profiling.store.rows import RunData, phase_rows, plain, run_columns, workload_key
from profiling.store.write import record
from tests.store.store_helpers import CONFIG, run_data, summary

# Every field run_columns reads, each a value no other field has.
SUMMARY = {
    **summary(),
    "ran": "SDPA math (dispatched)", "forwards": 7, "gpu_us_per_forward": 501.5,
    "cpu_us_per_forward": 81.5, "kernels_per_forward": 9.5, "memcpy_per_forward": 1.25,
    "memset_per_forward": 2.25, "flops_per_forward": 2.2e10, "tflops": 43.875,
    "tbps": 1.125, "bytes_moved": 3.5e8, "intensity": 62.75, "pct_peak_tflops": 4.375,
    "pct_peak_bandwidth": 23.5, "roofline_bound": "memory", "cpu_bound": True,
    "peak_mib": 2047.5, "rel_err": 1.5e-3, "dominant_kernel": "softmax_warp_forward",
    "dominant_decoded": "softmax (warp)", "saved_extra_bytes": 3 * 2**20,
    "grad_err": {"dq": 2.5e-3, "dk": 3.5e-3, "dv": 4.5e-3},
    "step_spread": {"gpu_us": {"median": 502.5, "q1": 499.5, "q3": 505.5},
                    "cpu_us": {"median": 82.5, "q1": 79.5, "q3": 85.5}},
    "gpu_clocks": {"sm_mhz_min": 1755, "sm_mhz_max": 1980, "mem_mhz_min": 2619,
                   "mem_mhz_max": 3201, "power_w_mean": 401.5, "power_w_max": 451.5,
                   "temp_c_max": 57, "throttled": ["power cap", "thermal"],
                   "warning": "clocks moved by 11%"},
    "device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch_version": "2.11.0+cu130",
    "machine": {"compute_capability": "9.0", "device_memory_gib": 79.2, "gpu_count": 2,
                "driver_version": "580.159.04", "cuda_version": "13.0", "triton_version": "3.6.0"},
}  # fmt: skip
FIGURES = {
    "ran": "SDPA math (dispatched)", "forwards": 7, "gpu_us": 501.5, "gpu_us_median": 502.5,
    "gpu_us_q1": 499.5, "gpu_us_q3": 505.5, "cpu_us": 81.5, "cpu_us_median": 82.5,
    "cpu_us_q1": 79.5, "cpu_us_q3": 85.5, "kernels": 9.5, "memcpy": 1.25, "memset": 2.25,
    "flops": 2.2e10, "tflops": 43.875, "tbps": 1.125, "bytes_moved": 3.5e8, "intensity": 62.75,
    "pct_peak_tflops": 4.375, "pct_peak_bandwidth": 23.5, "roofline_bound": "memory",
    "cpu_bound": 1, "peak_mib": 2047.5, "rel_err": 1.5e-3,
    "dominant_kernel": "softmax_warp_forward", "dominant_decoded": "softmax (warp)",
    "saved_mib": 3.0, "grad_err_dq": 2.5e-3, "grad_err_dk": 3.5e-3, "grad_err_dv": 4.5e-3,
    "sm_mhz_min": 1755, "sm_mhz_max": 1980, "mem_mhz_min": 2619, "mem_mhz_max": 3201,
    "power_w_mean": 401.5, "power_w_max": 451.5, "temp_c_max": 57,
    "throttled": "power cap, thermal", "clock_warning": "clocks moved by 11%",
    "device_kind": "cuda", "device_name": "NVIDIA H100 80GB HBM3",
    "torch_version": "2.11.0+cu130", "compute_capability": "9.0", "device_memory_gib": 79.2,
    "gpu_count": 2, "driver_version": "580.159.04", "cuda_version": "13.0",
    "triton_version": "3.6.0",
}  # fmt: skip


def _columns(summary_dict: dict[str, Any] | None, **config: Any) -> dict[str, Any]:
    data = RunData(kind="profile", origin="cli", config={**CONFIG, **config}, status="ok",
                   summary=summary_dict)  # fmt: skip
    return run_columns(data, "run-1", 1.5, "host-a", "space-b")


def test_each_figure_of_a_summary_is_its_own_column():
    columns = _columns(SUMMARY)
    assert {name: columns[name] for name in FIGURES} == FIGURES


def test_a_summary_without_its_optional_parts_stores_none_for_them():
    """No spread, clocks, machine, gradients or saved bytes: NULL, not 0 or a stale value."""
    optional = ("step_spread", "gpu_clocks", "machine", "grad_err", "saved_extra_bytes")
    bare = {k: v for k, v in SUMMARY.items() if k not in optional}
    columns = _columns(bare)
    absent = [
        "gpu_us_median", "gpu_us_q1", "gpu_us_q3", "cpu_us_median", "cpu_us_q1", "cpu_us_q3",
        "saved_mib", "grad_err_dq", "grad_err_dk", "grad_err_dv", "sm_mhz_min", "sm_mhz_max",
        "mem_mhz_min", "mem_mhz_max", "power_w_mean", "power_w_max", "temp_c_max", "throttled",
        "clock_warning", "compute_capability", "device_memory_gib", "gpu_count",
        "driver_version", "cuda_version", "triton_version",
    ]  # fmt: skip
    assert {name: columns[name] for name in absent} == dict.fromkeys(absent)
    assert columns["gpu_us"] == 501.5 and columns["device_name"] == "NVIDIA H100 80GB HBM3"


def test_a_clock_sample_with_nothing_throttled_stores_none_not_an_empty_text():
    clocks = {**SUMMARY["gpu_clocks"], "throttled": []}
    assert _columns({**SUMMARY, "gpu_clocks": clocks})["throttled"] is None


def test_the_runs_identity_and_workload_columns():
    columns = _columns(SUMMARY, variant="naive", seq_len=512)
    assert {k: columns[k] for k in ("id", "created", "kind", "origin", "host", "origin_space",
                                    "status", "reason", "variant", "seq_len")} == {
        "id": "run-1", "created": 1.5, "kind": "profile", "origin": "cli", "host": "host-a",
        "origin_space": "space-b", "status": "ok", "reason": "", "variant": "naive",
        "seq_len": 512,
    }  # fmt: skip
    assert columns["device_kind"] == "cuda"  # the summary's device, over the config's
    assert _columns(None, device="cpu")["device_kind"] is None  # no summary: from the config
    assert _columns(None)["device_kind"] == "cuda"


def test_each_phase_row_holds_its_phases_figures():
    phases = [{"phase": "attn_bwd", "gpu_us_per_forward": 11.5, "cpu_us": 3.5,
               "kernels_per_forward": 4.0, "flops": 1e9, "tflops": 87.5,
               "dominant_kernel": "bwd_kernel",
               "spread": {"gpu_us": {"median": 12.5, "q1": 10.5, "q3": 13.5},
                          "cpu_us": {"median": 4.5, "q1": 2.5, "q3": 5.5}}}]  # fmt: skip
    assert phase_rows({"phases": phases}) == [{
        "phase": "attn_bwd", "gpu_us": 11.5, "gpu_us_median": 12.5, "gpu_us_q1": 10.5,
        "gpu_us_q3": 13.5, "cpu_us": 3.5, "cpu_us_median": 4.5, "cpu_us_q1": 2.5,
        "cpu_us_q3": 5.5, "kernels": 4.0, "flops": 1e9, "tflops": 87.5,
        "dominant_kernel": "bwd_kernel",
    }]  # fmt: skip
    assert phase_rows(None) == [] and phase_rows({"phases": None}) == []


@pytest.mark.parametrize("name", ["gpu_us", "cpu_clock_warning_none"])
def test_a_stored_run_reads_back_its_columns(tmp_path, name):
    """Through a real store: what run_columns gave is what get_run reads."""
    store = open_store(tmp_path / "runs.sqlite")
    data = run_data(trace=None)
    data.summary = SUMMARY if name == "gpu_us" else {**SUMMARY, "gpu_clocks": {}}
    run_id = record(store, data).run_id
    row = query.get_run(store, run_id)
    expected = dict(FIGURES)
    if name != "gpu_us":
        expected |= {"throttled": None, "clock_warning": None, "sm_mhz_min": None}
    for column in ("gpu_us", "gpu_us_q3", "saved_mib", "throttled", "clock_warning",
                   "sm_mhz_min", "triton_version", "cpu_bound"):  # fmt: skip
        assert row[column] == expected[column], column
    assert row["host"] == socket.gethostname()  # the machine that recorded it


def test_a_run_the_schema_refuses_is_said_as_refused_and_the_store_stays_in_use(tmp_path):
    """A run with no variant (the runs table's NOT NULL): the store is sound, so the words
    say the run was not taken, not that the store is damaged; the next run is kept."""
    store = open_store(tmp_path / "runs.sqlite")
    broken = dataclasses.replace(run_data(trace=None), config={})
    with pytest.raises(StoreError) as refused:
        record(store, broken)
    assert str(refused.value) == (
        f"the run store {store.path} did not take this run (NOT NULL constraint failed: "
        "runs.variant); nothing of it was kept"
    )
    run_id = record(store, run_data(trace=None)).run_id
    assert query.list_runs(store)[1] == 1 and query.get_run(store, run_id)["id"] == run_id


def test_numpy_scalars_are_stored_as_pythons_numbers():
    """np.int64 and np.float32 are neither int nor float: stored as text they would sort and
    sum as strings."""
    assert plain(np.int64(3)) == 3 and type(plain(np.int64(3))) is int
    assert plain(np.float32(1.5)) == 1.5 and type(plain(np.float32(1.5))) is float
    assert plain(np.float64("nan")) is None and plain(np.bool_(True)) == 1


def test_a_summary_with_nan_or_values_json_lacks_is_kept_as_strict_json(tmp_path):
    """An overflowed fp16 output's rel_err is NaN: the run was refused ("Out of range float
    values are not JSON compliant") and lost; it is kept, NaN and infinity as null as in their
    columns, and a value JSON has no type for as its text."""
    store = open_store(tmp_path / "runs.sqlite")
    data = run_data(trace=None)
    data.summary = {**summary(), "rel_err": float("nan"), "bound": float("inf"),
                    "trace_path": Path("/runs/a.json.gz")}  # fmt: skip
    run = query.get_run(store, record(store, data).run_id)
    kept = json.loads(run["summary_json"], parse_constant=lambda name: pytest.fail(name))
    assert (kept["rel_err"], kept["bound"], kept["trace_path"]) == (None, None, "/runs/a.json.gz")
    assert run["rel_err"] is None and kept["gpu_us_per_forward"] == 500.0


def test_a_runs_roles_and_operators_are_its_child_rows(tmp_path):
    store = open_store(tmp_path / "runs.sqlite")
    data = run_data(trace=None)
    data.roles = pd.DataFrame({"phase": ["forward"], "role": ["attention"],
                               "us": [np.float64(7.5)], "pct_gpu": [75.0],
                               "calls": [np.int64(2)], "kernels": ["fwd_kernel"]})  # fmt: skip
    data.operators = pd.DataFrame({"operator": ["aten::mm"], "calls": [4], "cpu_self_us": [1.0],
                                   "device_total_us": [9.0]})  # fmt: skip
    tables = query.children(store, record(store, data).run_id)
    assert tables["roles"].to_dict("records") == [
        {"phase": "forward", "role": "attention", "us": 7.5, "pct_gpu": 75.0, "calls": 2,
         "kernels": "fwd_kernel"}]  # fmt: skip
    operators = tables["operators"].to_dict("records")
    assert [(o["operator"], o["calls"], o["device_total_us"]) for o in operators] == [
        ("aten::mm", 4, 9.0)
    ]
    assert pd.isna(operators[0]["cpu_avg_us"])  # a column the frame lacked: NULL


def test_a_value_of_no_stored_type_is_stored_as_its_text():
    assert plain(Path("/runs/a")) == "/runs/a"
    assert plain(Decimal("1.25")) == "1.25"


def test_the_trend_key_as_stores_already_hold_it():
    """Stores written earlier hold these keys: a changed text splits every trend in two."""
    assert workload_key(CONFIG) == (
        '["sdpa-math", 1024, "bfloat16", 8, 16, 64, true, 3, "forward", null, null, null, "eager"]'
    )  # the device is not in it: H100 and H200 runs share a trend, split by device after
    model = {**CONFIG, "preset": "llama-tiny", "layers": 2, "lengths": "128,256"}
    assert workload_key(model) == (
        '["model", "sdpa-math", 1024, "bfloat16", 8, 16, 64, true, 3, "forward", null, null, '
        'null, "eager", "llama-tiny", 2, "128,256", null]'
    )
