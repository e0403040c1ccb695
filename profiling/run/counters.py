"""The counter pass: the measured step once more, in its own process, under Nsight Compute.

Before starting anything it says why counters cannot run here (`unavailable_reason`): a CPU,
a ZeroGPU Space (the GPU is lent to one function call; ncu cannot wrap it), no `ncu`, no
`ncu_report` to read its report. After ncu ran, its output is read for the reasons it gives
(`ncu_reason`: counters restricted to admin users, no kernels in the range). Never a value
made up in place of one not measured. No torch here: the child (profiling.run.counters_step) has it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from profiling.analysis.counters import (
    METRICS,
    Counters,
    CountersUnavailable,
    load_module,
    read_report,
)

RANGE = "attn_counters"  # the NVTX range around the measured step (profiling.run.counters_step)
MAX_KERNELS = 64  # ncu's --launch-count: keeps naive at long shapes bounded
TIMEOUT_S = 300
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


def measure(
    workload: Mapping[str, Any], device: str, out_dir: Path, timeout_s: float = TIMEOUT_S
) -> Counters:
    """Run the counter pass for `workload` (its as_dict) and read its report; a Counters with
    the reason when it cannot (nothing is estimated in its place)."""
    began = time.perf_counter()
    env = os.environ
    ncu = find_ncu(env)
    reason = unavailable_reason(device, env, ncu)
    if reason:
        return Counters(reason=reason)
    report = Path(out_dir) / "counters.ncu-rep"
    command = ncu_command(ncu, report, workload)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              cwd=_repo_root(), check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return Counters(reason=f"the counter pass took over {timeout_s:.0f} s and was stopped",
                        seconds=time.perf_counter() - began)  # fmt: skip
    output = (done.stdout or "") + (done.stderr or "")
    (Path(out_dir) / "counters.log").write_text(" ".join(command) + "\n" + output)
    reason = ncu_reason(output, done.returncode)
    if not reason and not report.is_file():
        reason = "ncu wrote no report"
    if reason:
        return Counters(reason=reason, seconds=time.perf_counter() - began)
    try:
        counters = read_report(report, load_module(ncu))
    except Exception as exc:  # a report ncu_report cannot read: said, the run kept
        return Counters(reason=f"ncu's report could not be read: {type(exc).__name__}: {exc}",
                        seconds=time.perf_counter() - began)  # fmt: skip
    counters.seconds = time.perf_counter() - began
    eager = workload.get("timing", "eager") == "eager"
    counters.how = HOW if eager else f"{HOW}; the step ran eagerly there (ncu replays kernels)"
    if counters.kernels.empty:
        counters.reason = f"ncu profiled no kernels inside the NVTX range '{RANGE}'"
    return counters


def _repo_root() -> str:
    """Where `python -m profiling.run.counters_step` finds this package."""
    return str(Path(__file__).resolve().parents[2])
