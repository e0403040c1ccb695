"""Sweeps and Compares on a real local Ray cluster (ray.init, two CPU workers), against the
serial loop: the same tables but timings, a worker killed mid-point replaced and its point
retried, an unavailable point not retried. One cluster for the module: starting Ray and its
workers (each imports torch) is most of these tests' time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import ray

import profiling.jobs.executor as executor_module
from profiling.jobs.compare import compare
from profiling.jobs.executor import RAY_ADDRESS_ENV, app_executor
from profiling.jobs.ray import DIE_ON_ENV, RayExecutor
from profiling.jobs.sweep import sweep

ROOT = Path(__file__).parents[2]
SHAPE = {"batch": 1, "heads": 2, "head_dim": 32, "dtype": "float32", "device": "cpu", "steps": 1}
# sdpa-cudnn is unavailable on a CPU: its first length ends its run, the second is marked
VARIANTS, LENGTHS = ["naive", "sdpa-math", "sdpa-cudnn"], [32, 64]
TIMINGS = ["GPU µs/fwd", "CPU µs/fwd", "TFLOP/s"]


@pytest.fixture(scope="module")
def executor():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    on_ray = RayExecutor(None)
    yield on_ray
    on_ray.close()
    ray.shutdown()


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    return sweep(VARIANTS, LENGTHS, out_dir=tmp_path_factory.mktemp("serial"), **SHAPE)


def _untimed(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=TIMINGS)


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


def test_ray_sweep_equals_serial_but_timings(executor, serial, tmp_path):
    said: list[str] = []
    result = sweep(
        VARIANTS,
        LENGTHS,
        out_dir=tmp_path,
        executor=executor,
        progress=lambda fraction, text: said.append(text),
        **SHAPE,
    )
    pd.testing.assert_frame_equal(_untimed(result.table), _untimed(serial.table))
    assert result.table["CPU µs/fwd"].notna().sum() == 4  # the four that ran have timings
    assert _files(tmp_path) == _files(serial.out_dir)  # every trace came back, nothing more
    assert all(p.trace_gz.is_relative_to(tmp_path) for p in result.points if p.trace_gz)
    with zipfile.ZipFile(result.zip_path) as ours, zipfile.ZipFile(serial.zip_path) as theirs:
        assert sorted(ours.namelist()) == sorted(theirs.namelist())
    assert any("CPU0: " in text and "CPU1: " in text for text in said)  # two points at once
    ran = [p.placement for p in result.points if p.placement is not None]
    assert len(ran) == 5 and all(p.device == "CPU" for p in ran)  # one was never run


def test_unavailable_point_is_not_retried(executor, tmp_path):
    result = sweep(["sdpa-cudnn"], LENGTHS, out_dir=tmp_path, executor=executor, **SHAPE)
    first, second = result.points
    assert first.status == second.status == "unavailable"
    assert first.placement is not None and first.placement.attempts == 1
    assert second.placement is None  # the variant's run ended at its first length


def test_killed_worker_is_replaced_and_its_point_retried(executor, serial, tmp_path, monkeypatch):
    monkeypatch.setenv(DIE_ON_ENV, "naive:64")
    result = sweep(VARIANTS, LENGTHS, out_dir=tmp_path, executor=executor, **SHAPE)
    pd.testing.assert_frame_equal(_untimed(result.table), _untimed(serial.table))
    attempts = {(p.variant, p.seq_len): p.placement.attempts for p in result.points[:4]}
    assert attempts == {("naive", 32): 1, ("naive", 64): 2, ("sdpa-math", 32): 1,
                        ("sdpa-math", 64): 1}  # fmt: skip
    assert _files(tmp_path) == _files(serial.out_dir)  # the dead attempt left nothing behind


def test_point_whose_worker_dies_twice_fails_with_the_reason(executor, tmp_path, monkeypatch):
    monkeypatch.setenv(DIE_ON_ENV, "sdpa-math:32:2")
    result = compare(
        ["naive", "sdpa-math"], seq_len=32, out_dir=tmp_path, executor=executor, **_no_len()
    )
    statuses = dict(zip(result.glance["variant"], result.glance["status"], strict=True))
    assert statuses == {"naive": "ok", "sdpa-math": "failed"}
    assert "worker died" in result.runs[1].reason
    assert "tried on 2 workers" in result.runs[1].reason
    naive = result.runs[0]
    assert naive.table_txt is not None and naive.table_txt.is_relative_to(tmp_path)
    assert all(path.exists() for path in (naive.trace_gz, *naive.extra_files))


def _no_len() -> dict:
    return {k: v for k, v in SHAPE.items() if k != "seq_len"}


def test_app_runs_on_ray_only_when_started_with_an_address(executor, monkeypatch):
    monkeypatch.setattr(executor_module, "_APP_EXECUTOR", [])
    monkeypatch.delenv(RAY_ADDRESS_ENV, raising=False)
    assert app_executor() is None  # today's serial loop
    monkeypatch.setenv(RAY_ADDRESS_ENV, "local")
    on_ray = app_executor()
    assert isinstance(on_ray, RayExecutor) and on_ray.address is None
    assert app_executor() is on_ray  # one for the app's life: its workers stay warm


def test_cli_and_app_do_not_import_ray():
    """Ray is an extra: the CLI and the page load without it until a job asks for it."""
    code = (
        "import sys; import profiling.__main__, profiling.cli.commands, profiling.jobs.sweep, "
        "profiling.jobs.compare, profiling.jobs.executor, profiling.page.sweep_tab, "
        "profiling.page.compare_tab; print('ray' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
