"""A run's Summary as text: (label, text) rows for the CLI, the page's strip and the docs.

One formatting everywhere: a None figure reads "n/a" with its reason, and the per-step figures
are named by what one step is (a forward, a backward, or a training step).
"""

from __future__ import annotations

from typing import Any

from profiling.analysis.spread import mean_note, median_note
from profiling.analysis.summary import NO_GPU_WORK, Summary
from profiling.kernels.names import with_reading
from profiling.text_tables import count_text, shape_text
from profiling.views.text.timing import timing_rows


def _num(value: float | None, unit: str = "", digits: int = 1) -> str:
    if value is None or value != value:  # None or NaN
        return "n/a"
    return f"{value:,.{digits}f}{unit}"


def _or(value: float | None, missing: str, unit: str = "", digits: int = 1) -> str:
    """A figure, or `missing` (why there is none) where it is None."""
    return missing if value is None else _num(value, unit, digits)


def _count(value: float | None, missing: str) -> str:
    """A count per step (text_tables.count_text), or `missing` where there is none."""
    return missing if value is None or value != value else count_text(value)


def _rate(value: float | None) -> str:
    """One decimal from 10 up (523.4), three significant figures below: a CPU run's 0.00473
    would read 0.00 with a fixed two decimals (Compare and Sweep show 3 figures too)."""
    if value is None or value != value:
        return "n/a"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


UNITS = {"forward": "forward", "backward": "backward", "train": "step"}  # what one "per" is


def unit(summary: Summary) -> str:
    """What the per-step figures are per: a forward, a backward, or a training step."""
    return UNITS.get(summary.mode, "forward")


def summary_rows(summary: Summary) -> list[tuple[str, str]]:
    """The summary as (label, text) pairs: one formatting for the CLI, the page and the docs."""
    config = summary.config
    per = unit(summary)
    # a None GPU figure: the runner found no GPU work (a CPU run; on a GPU, an empty trace)
    none = NO_GPU_WORK if summary.device != "cuda" else "n/a (no GPU work in the trace)"
    bound = {True: f"CPU-bound (CPU time per {per} > GPU time)", False: "GPU-bound", None: none}
    shape = shape_text({**config, "mode": "forward"})  # the mode has its own row
    copies = none
    if summary.memcpy_per_forward is not None and summary.memset_per_forward is not None:
        copies = (
            f"{count_text(summary.memcpy_per_forward)} / {count_text(summary.memset_per_forward)}"
        )
    spread = summary.step_spread or {}
    cpu_us = _num(summary.cpu_us_per_forward) + median_note(spread.get("cpu_us"))
    gpu_us = _or(summary.gpu_us_per_forward, none)
    if summary.gpu_us_per_forward is not None:
        gpu_us += mean_note(spread.get("gpu_us"))
    error = "n/a"
    if summary.rel_err is not None:
        error = f"{summary.rel_err:.2e} ({summary.rel_err_note})"
    dominant = "n/a"
    if summary.dominant_kernel:
        dominant = with_reading(summary.dominant_kernel, summary.dominant_decoded)
    rows = [
        ("variant", f"{summary.variant} — {summary.label}"),
        ("shape", shape),
        ("ran", summary.ran),
        ("device", f"{summary.device_name} · torch {summary.torch_version}"),
        (f"kernels / {per}", _count(summary.kernels_per_forward, none)),
        (f"memcpy / memset per {per}", copies),
        (f"GPU µs / {per}", gpu_us),
        (f"CPU µs / {per}", cpu_us),
        ("bound", bound[summary.cpu_bound]),
        ("peak memory", _or(summary.peak_mib, none, " MiB")),
        ("TFLOP/s", f"{_rate(summary.tflops)} ({summary.tflops_basis})"),
        *roofline_rows(summary),
        ("rel. error vs float64", error),
        ("dominant kernel", dominant),
        (f"{per}s recorded", str(summary.forwards)),
    ]
    rows[1:1] = [("mode", MODE_TEXT[summary.mode])] if summary.mode != "forward" else []
    rows += training_rows(summary)
    rows += timing_rows(summary, per)
    rows += sdpa_rows(summary)
    rows += [("note", note) for note in summary.notes]
    return rows


def roofline_rows(summary: Summary) -> list[tuple[str, str]]:
    """What must move and how fast it moved, and which roof bounds the run (analysis/bounds.py)."""
    if summary.bytes_moved is None:
        return []
    moved = f"{_size(summary.bytes_moved)} must move (q, k, v read, the output written once)"
    if summary.tbps is not None:
        moved += f" · {summary.tbps:,.2f} TB/s"
        if summary.pct_peak_bandwidth is not None:
            moved += f" ({summary.pct_peak_bandwidth:.0f}% of the datasheet bandwidth)"
    bound = f"{summary.roofline_bound} · {summary.intensity:,.1f} FLOP/byte"
    if summary.pct_peak_tflops is not None and summary.pct_peak_bandwidth is not None:
        bound += (
            f" · {summary.pct_peak_tflops:.0f}% of peak TFLOP/s, "
            f"{summary.pct_peak_bandwidth:.0f}% of peak bandwidth"
        )
    return [("memory traffic", moved), ("roofline", bound)]


def sdpa_rows(summary: Summary) -> list[tuple[str, str]]:
    """SDPA's own checks, for an SDPA run: which backend accepts these inputs, torch's reason
    where one refuses, and the one it picks when left to choose."""
    return sdpa_account_rows(summary.sdpa_backends, summary.device)


def sdpa_account_rows(found: dict[str, Any] | None, device: str) -> list[tuple[str, str]]:
    """sdpa_rows for an account as sdpa_reasons' explainer gives it (a run's, or the picker's
    before a run). On a CPU the checks are CUDA's, refusing CPU tensors, and the pick is among
    the CPU's own kernels: said as such, not as 'picks flash · flash refuses'."""
    if not found or "checks" not in found:
        return []
    checks = found["checks"]
    parts = []
    if device != "cuda":  # torch's checks are the CUDA backends': a CPU tensor is refused
        cpu_only = [c["backend"] for c in checks if list(c["reasons"]) == [CPU_REFUSAL]]
        checks = [c for c in checks if c["backend"] not in cpu_only]
        if cpu_only:
            parts.append(f"the CUDA backends ({', '.join(cpu_only)}) refuse CPU tensors")
    cuda = "CUDA " if device != "cuda" else ""
    for check in checks:
        why = "; ".join(check["reasons"]) or "no reason given"
        parts.append(f"{cuda}{check['backend']} accepts" if check["accepts"] else
                     f"{cuda}{check['backend']} refuses ({why})")  # fmt: skip
    parts.append("math accepts everything" if device == "cuda" else CPU_CHOICE)
    picks = str(found["chosen"])
    if device != "cuda":
        picks = CPU_PICKS.get(picks, picks)
    if found.get("through_causal_bias"):
        picks += " (causal_lower_right asks flash, then efficient, before the dispatcher)"
    return [("SDPA's checks", " · ".join(parts)), ("SDPA picks", picks)]


# A CPU's SDPA picks its own flash kernel (not the CUDA backend of the same name) or math.
# Spelled as attention/sdpa_reasons.py spells them (views import no attention; a test pins both)
CPU_FLASH_KERNEL = "_scaled_dot_product_flash_attention_for_cpu"
CPU_REFUSAL = (
    f"a CUDA backend: its checks refuse tensors on the CPU, whose flash is {CPU_FLASH_KERNEL}"
)
CPU_CHOICE = f"on a CPU, SDPA chooses between its own flash kernel ({CPU_FLASH_KERNEL}) and math"
CPU_PICKS = {"flash": f"flash: the CPU's own flash kernel ({CPU_FLASH_KERNEL}), not the CUDA one"}

MODE_TEXT = {
    "backward": "backward: the backward measured alone (its forward runs outside attn_bwd)",
    "train": "train: one step is the forward (attn_fwd) and the backward (attn_bwd)",
}


def training_rows(summary: Summary) -> list[tuple[str, str]]:
    """A run with a backward: each phase per step, the gradients' errors, the saved bytes."""
    if summary.mode == "forward":
        return []
    rows = [(f"phase {row['phase']}", phase_text(row)) for row in summary.phases]
    if summary.grad_err:
        errors = " / ".join(f"{summary.grad_err[name]:.2e}" for name in ("dq", "dk", "dv"))
        rows.append(("dQ / dK / dV rel. error", f"{errors} ({summary.grad_err_note})"))
    if summary.saved is not None:
        rows.append(("saved for backward", saved_text(summary.saved, summary.saved_extra_bytes)))
    return rows


def phase_text(row: dict[str, Any]) -> str:
    """`12 kernels · 345.6 GPU µs · 210.0 CPU µs · 312 TFLOP/s · flash_bwd…` per step."""
    if row["gpu_us_per_forward"] is None:  # a CPU run: its rate is of CPU time
        figures = f"{_num(row['cpu_us'])} CPU µs · {_rate(row['tflops'])} TFLOP/s of CPU time"
    else:
        figures = (
            f"{_count(row['kernels_per_forward'], 'n/a')} kernels · "
            f"{_num(row['gpu_us_per_forward'])} GPU µs · {_num(row['cpu_us'])} CPU µs · "
            f"{_rate(row['tflops'])} TFLOP/s"
        )
    return figures + (f" · {row['dominant_kernel']}" if row["dominant_kernel"] else "")


def saved_text(saved: list[dict[str, Any]], extra: int | None) -> str:
    """`256.0 MiB beyond the inputs and output: B·H·S² attention matrix 256.0 MiB, …`"""
    kept = [row for row in saved if row["what"] not in ("q", "k", "v", "output")]
    parts = ", ".join(f"{row['what']} {_size(row['bytes'])}" for row in kept)
    return f"{_size(extra or 0)} beyond q, k, v and the output" + (f": {parts}" if parts else "")


def _size(size: int) -> str:
    for limit, name in ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if size >= limit:
            return f"{size / limit:,.1f} {name}"
    return f"{size} B"
