"""Issue 40: the counter pass is bounded per job, and a timed-out ncu leaves nothing behind.

A Compare of ten with counters could hold the one device worker 10 × (300 + 120) s; its passes
now share JOB_SECONDS. Past its time, ncu's whole process group is killed: with
subprocess.run's timeout a child of ncu was left running under PID 1.

The ncu here is a stand-in script on PATH that starts a child and sleeps, as ncu starts the
profiled process: these tests exercise our process handling, not Nsight Compute (the real ncu
runs in tests/gpu/test_gpu_counters.py on the GPU machine). NVIDIA's report module, which the
stand-in cannot provide, is the one check replaced.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from profiling.jobs.compare import compare
from profiling.run import counters, runner

STAND_IN = """#!/bin/sh
# a stand-in for ncu: starts a child (as ncu starts the profiled process) and waits
sleep 600 &
echo $! > "{pids}"
sleep 600
"""
SHAPE = dict(seq_len=64, dtype="float32", batch=1, heads=2, head_dim=16, causal=True,
             device="cpu", steps=1)  # fmt: skip


@pytest.fixture
def stand_in_ncu(tmp_path, monkeypatch) -> Path:
    """`ncu` on PATH is the stand-in; the file it writes names its child's pid."""
    folder = tmp_path / "bin"
    folder.mkdir()
    pids = tmp_path / "child.pid"
    script = folder / "ncu"
    script.write_text(STAND_IN.format(pids=pids))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(counters.NCU_ENV, raising=False)
    monkeypatch.setattr(counters, "load_module", lambda ncu: None)  # NVIDIA's report reader
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_timed_out_ncu_is_ended_with_its_whole_process_group(stand_in_ncu, tmp_path):
    began = time.monotonic()
    measured = counters.measure({"variant": "naive"}, "cuda", tmp_path, timeout_s=1.5)
    assert time.monotonic() - began < 10
    assert measured.reason == "the counter pass took over 2 s and was stopped"
    child = int(stand_in_ncu.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), f"ncu's child {child} outlived the timeout"


def test_a_pass_keeps_to_its_share_of_the_jobs_bound(stand_in_ncu, tmp_path):
    """A pass given 3 s stops ncu within them (its report's reading keeps the rest)."""
    began = time.monotonic()
    measured = counters.measure({"variant": "naive"}, "cuda", tmp_path, budget_s=3.0)
    assert time.monotonic() - began < 3.0 + 2.0  # the stop, on two busy cores
    assert "was stopped" in measured.reason


def test_a_jobs_counter_passes_share_one_bound():
    assert counters.pass_seconds(1) == counters.PASS_SECONDS == 420  # one Profile: as before
    for passes in range(1, 31):
        assert passes * counters.pass_seconds(passes) <= counters.JOB_SECONDS == 600


def test_a_compare_gives_each_variant_its_share(monkeypatch):
    """A real CPU Compare with counters asked for: the runner hands each pass its share."""
    given: list[float] = []

    def measure(workload, device, out_dir, timeout_s=counters.TIMEOUT_S, budget_s=None):
        given.append(budget_s)
        return counters.Counters(reason=counters.ON_CPU)

    monkeypatch.setattr(runner.collect, "measure", measure)
    variants = ["naive", "naive-inplace", "sdpa-math"]
    result = compare(variants, counters=True, make_zip=False, **SHAPE)
    assert [r.status for r in result.runs] == ["ok"] * 3
    assert given == [counters.JOB_SECONDS / 3] * 3
