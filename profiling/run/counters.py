"""The counter pass: the measured step once more, in its own process, under Nsight Compute.

Before starting anything it says why counters cannot run here (`unavailable_reason`): a CPU,
a ZeroGPU Space (the GPU is lent to one function call; ncu cannot wrap it), no `ncu`, no
`ncu_report` to read its report. After ncu ran, its output is read for the reasons it gives
(`ncu_reason`: counters restricted to admin users, no kernels in the range). Never a value
made up in place of one not measured. No torch here: the child (profiling.run.counters_step) has it.

Bounded in time: one pass (ncu, then reading its report) takes at most PASS_SECONDS (300 s for
ncu, the rest to read), and the passes of one job (a Compare's variants) together at most
JOB_SECONDS: each of its n passes gets `pass_seconds(n)` = min(PASS_SECONDS, JOB_SECONDS / n),
so a Compare of ten holds the device worker at most 600 s for counters, not 10 × 420 s. ncu runs
in a session of its own and, past its time, its whole process group is killed: the profiled
child it starts (and any child of that) goes with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.counters import (
    COLUMNS,
    METRICS,
    Counters,
    CountersUnavailable,
    load_module,
)

RANGE = "attn_counters"  # the NVTX range around the measured step (profiling.run.counters_step)
MAX_KERNELS = 64  # ncu's --launch-count: keeps naive at long shapes bounded
TIMEOUT_S = 300  # ncu, in one pass
READ_TIMEOUT_S = 120  # reading its report
PASS_SECONDS = TIMEOUT_S + READ_TIMEOUT_S
JOB_SECONDS = 600  # every counter pass of one job together
NCU_ENV = "ATTNPROF_NCU"  # a path to ncu when it is not on PATH
PERMISSION = "ERR_NVGPUCTRPERM"
HOW_TO_ALLOW = (
    "the GPU's performance counters are restricted to admin users (ERR_NVGPUCTRPERM). Allow "
    "them with `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in a file under "
    "/etc/modprobe.d/ and reload the nvidia module (or reboot), or run as root / with "
    "CAP_SYS_ADMIN (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)
ON_CPU = "counters need an NVIDIA GPU: this run is on the CPU"
ON_ZERO_GPU = (
    "a ZeroGPU Space lends the GPU to one function call at a time; Nsight Compute cannot "
    "profile a process there (run the app on a GPU machine of your own with ncu installed)"
)
NO_NCU = (
    "Nsight Compute's `ncu` is not on PATH (install Nsight Compute, part of the CUDA toolkit, "
    f"or set {NCU_ENV} to its path)"
)
HOW = (
    "ncu's figures: each kernel replayed once per metric pass with caches flushed between "
    "passes, clocks left as they were (--clock-control none): its durations are ncu's, not the "
    "profiler's"
)


def zero_gpu(env: Mapping[str, str]) -> bool:
    """A ZeroGPU Space: the switch the spaces package reads (SPACES_ZERO_GPU) is on."""
    return env.get("SPACES_ZERO_GPU", "").strip().lower() in {"1", "true", "yes", "on"}


def find_ncu(env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which) -> str:
    """ncu's path ($ATTNPROF_NCU, else PATH, else CUDA's usual folder), or ''."""
    named = env.get(NCU_ENV, "")
    if named:
        return named if os.access(named, os.X_OK) else ""
    found = which("ncu") or ""
    usual = "/usr/local/cuda/bin/ncu"
    return found or (usual if os.access(usual, os.X_OK) else "")


def unavailable_reason(
    device: str, env: Mapping[str, str] | None = None, ncu: str | None = None
) -> str:
    """Why counters cannot run here ('' when they can be tried): the checks that cost nothing."""
    env = os.environ if env is None else env
    if device != "cuda":
        return ON_CPU
    if zero_gpu(env):
        return ON_ZERO_GPU
    ncu = find_ncu(env) if ncu is None else ncu
    if not ncu:
        return NO_NCU
    try:
        load_module(ncu)
    except CountersUnavailable as exc:
        return str(exc)
    return ""


def ncu_reason(output: str, returncode: int) -> str:
    """What ncu's output says went wrong ('' when nothing did)."""
    if PERMISSION in output:
        return HOW_TO_ALLOW
    if "No kernels were profiled" in output:
        return f"ncu profiled no kernels inside the NVTX range '{RANGE}'"
    if returncode != 0:
        lines = [line for line in output.strip().splitlines() if line.strip()]
        return f"ncu failed (exit {returncode}): " + (" / ".join(lines[-3:]) or "no output")
    return ""


def ncu_command(ncu: str, report: Path, workload: Mapping[str, Any]) -> list[str]:
    """The ncu line: only the NVTX range's kernels, at most MAX_KERNELS, METRICS only."""
    return [
        ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", f"{RANGE}/",
        "--metrics", ",".join(METRICS.values()), "--launch-count", str(MAX_KERNELS),
        "-f", "-o", str(report.with_suffix("")),
        sys.executable, "-m", "profiling.run.counters_step", json.dumps(dict(workload)),
    ]  # fmt: skip


def pass_seconds(passes: int) -> float:
    """The seconds each of a job's `passes` counter passes may take: JOB_SECONDS shared, at
    most PASS_SECONDS each."""
    return min(PASS_SECONDS, JOB_SECONDS / max(passes, 1))


def bounded_run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess | None:
    """`command` run to its end, or None past `timeout_s`: it starts a session of its own, and
    its whole process group is killed then (subprocess.run's timeout kills only the child it
    started, and ncu's profiled process was left running, adopted by PID 1)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=_repo_root(), start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=max(timeout_s, 0.0))
    except subprocess.TimeoutExpired:
        return None
    finally:  # timed out, or this thread interrupted: nothing of the group outlives the call
        if process.returncode is None:
            _kill_group(process)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen) -> None:
    """Its process group killed, the process reaped, its pipes closed (not drained: a process
    that left the group could hold them open)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def measure(
    workload: Mapping[str, Any],
    device: str,
    out_dir: Path,
    timeout_s: float = TIMEOUT_S,
    budget_s: float = PASS_SECONDS,
) -> Counters:
    """Run the counter pass for `workload` (its as_dict) and read its report; a Counters with
    the reason when it cannot (nothing is estimated in its place). `budget_s`: the whole
    pass's seconds (a job's share, `pass_seconds`); ncu gets at most `timeout_s` of it and
    leaves READ_TIMEOUT_S's share to read its report."""
    began = time.perf_counter()
    env = os.environ
    ncu = find_ncu(env)
    reason = unavailable_reason(device, env, ncu)
    if reason:
        return Counters(reason=reason)
    report = Path(out_dir) / "counters.ncu-rep"
    command = ncu_command(ncu, report, workload)
    ncu_s = min(timeout_s, budget_s * TIMEOUT_S / PASS_SECONDS)
    done = bounded_run(command, ncu_s)
    if done is None:
        return Counters(reason=f"the counter pass took over {ncu_s:.0f} s and was stopped",
                        seconds=time.perf_counter() - began)  # fmt: skip
    output = (done.stdout or "") + (done.stderr or "")
    (Path(out_dir) / "counters.log").write_text(" ".join(command) + "\n" + output)
    reason = ncu_reason(output, done.returncode)
    if not reason and not report.is_file():
        reason = "ncu wrote no report"
    if reason:
        return Counters(reason=reason, seconds=time.perf_counter() - began)
    left = budget_s - (time.perf_counter() - began)
    counters = read_apart(report, ncu, min(READ_TIMEOUT_S, max(left, 1.0)))
    if counters.reason:
        counters.seconds = time.perf_counter() - began
        return counters
    counters.seconds = time.perf_counter() - began
    eager = workload.get("timing", "eager") == "eager"
    counters.how = HOW if eager else f"{HOW}; the step ran eagerly there (ncu replays kernels)"
    if counters.kernels.empty:
        counters.reason = f"ncu profiled no kernels inside the NVTX range '{RANGE}'"
    return counters


def read_apart(report: Path, ncu: str, timeout_s: float = READ_TIMEOUT_S) -> Counters:
    """The report read by NVIDIA's module in a child process of its own (loaded beside torch
    and CUDA it crashed the profiled process on the H200); its rows come back as JSON."""
    command = [sys.executable, "-m", "profiling.analysis.counters", str(report), ncu]
    done = bounded_run(command, timeout_s)
    if done is None:
        return Counters(reason=f"reading ncu's report took over {timeout_s:.0f} s")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Counters(reason=f"ncu's report could not be read: {last}")
    answer = json.loads(done.stdout)
    kernels = pd.DataFrame(answer["rows"], columns=COLUMNS)
    return Counters(kernels=kernels, missing=answer["missing"], report=report)


def _repo_root() -> str:
    """Where `python -m profiling.run.counters_step` finds this package."""
    return str(Path(__file__).resolve().parents[2])
