"""For SDPA inside the model: the backend that ran (from the trace), the call as torch saw it,
and torch's verdict on each fused backend in its own words; for each implementation, the
kernels its attention ran."""

from __future__ import annotations

from profiling.run.model.result import ImplementationRun, ModelRun
from profiling.views.model.table import busy_ms


def sdpa_lines(item: ImplementationRun) -> list[str]:
    """Why SDPA ran what it ran inside the model (empty for the other implementations)."""
    if not item.ok or item.sdpa is None:
        return []
    account = item.sdpa
    lines = [
        f"{item.id}: the trace shows SDPA's {item.backend or 'unknown'} backend ran; its "
        f"dispatcher picks {account.chosen} for the model's call: {account.call}"
    ]
    for backend, accepts, reasons in account.checks:
        verdict = (
            "accepts" if accepts else "refuses: " + ("; ".join(reasons) or "(no reason given)")
        )
        lines.append(f"  {backend} {verdict}")
    return lines


def kernel_lines(item: ImplementationRun) -> list[str]:
    if not item.ok or not item.attention_kernels:
        return []
    named = ", ".join(f"{name} ({us:.1f} µs)" for name, us in item.attention_kernels[:3])
    return [f"{item.id}: attention ran {named} a step"]


# Beyond this the profiled step is not the step: say so (prefill read 0.975–1.045× on an H100,
# a host-bound decode 1.1–2.3×: docs/results-model.md).
PROFILER_STRETCH = 1.05


def timing_lines(item: ImplementationRun) -> list[str]:
    """When the profiler lengthened the step: by how much, and which time to quote."""
    if not item.ok or not item.split or not item.timed_ms:
        return []
    traced = item.split.step_us / 1e3
    stretch = traced / item.timed_ms
    if stretch <= PROFILER_STRETCH:
        return []
    busy = busy_ms(item)
    gpu = (
        f"; the GPU was busy {busy:.2f} ms of the profiled step (its kernels, which the "
        "profiler does not lengthen: the GPU's work)"
        if busy is not None
        else ""
    )
    return [
        f"{item.id}: the profiled step took {traced:.2f} ms, the same step without the "
        f"profiler {item.timed_ms:.2f} ms (+{100 * (stretch - 1):.0f}%): a step bound by the "
        "host (Python, many small kernels: a decode) slows under the profiler's own work, so "
        f"its trace shows where time goes, and the bare timing is the one to quote{gpu}"
    ]


def lines(result: ModelRun) -> list[str]:
    """Every implementation's account: what ran, SDPA's reasons, refusals and failures."""
    found = [f"built {result.text} on {result.device} in {result.build_s:.2f} s"]
    for item in result.runs:
        if item.refused:
            found.append(f"refused: {item.refused}")
        elif item.failed:
            found.append(f"failed: {item.failed}")
        else:
            found += kernel_lines(item) + sdpa_lines(item) + timing_lines(item)
            if item.note:
                found.append(f"{item.id}: {item.note}")
    return found


def text(result: ModelRun) -> str:
    return "\n".join(lines(result))
