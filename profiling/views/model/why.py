"""For SDPA inside the model: the backend that ran (from the trace), the call as torch saw it,
and torch's verdict on each fused backend in its own words; for each implementation, the
kernels its attention ran."""

from __future__ import annotations

from profiling.run.model.result import ImplementationRun, ModelRun


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


def lines(result: ModelRun) -> list[str]:
    """Every implementation's account: what ran, SDPA's reasons, refusals and failures."""
    found = [f"built {result.text} on {result.device} in {result.build_s:.2f} s"]
    for item in result.runs:
        if item.refused:
            found.append(f"refused: {item.refused}")
        elif item.failed:
            found.append(f"failed: {item.failed}")
        else:
            found += kernel_lines(item) + sdpa_lines(item)
            if item.note:
                found.append(f"{item.id}: {item.note}")
    return found


def text(result: ModelRun) -> str:
    return "\n".join(lines(result))
