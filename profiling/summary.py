"""Per-forward figures read off the spans table: what one `attn_fwd` cost on CPU and GPU.

GPU work is attributed to a forward through its launch (the correlation link), not by time:
kernels run late, so a forward's kernels often start after its CPU span has ended, and the
first kernels in a trace may belong to a warm-up step whose CPU side was not recorded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from attention.sdpa import BACKEND_OPS
from profiling.kernels import decode, short_name
from profiling.trace import Trace

FORWARD = "attn_fwd"
GPU_WORK = ("kernel", "memcpy", "memset")
CAUSAL_CONVENTION = "causal attention counted as half of the 4·B·H·S²·D FLOPs of full attention"


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool) -> float:
    """Two matmuls of 2·S²·D each per (batch, head); causal does half the work."""
    full = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return full / 2 if causal else full


@dataclass
class ForwardStats:
    forwards: int
    kernels: float
    memcpy: float
    memset: float
    gpu_us: float | None  # None when the trace has no GPU work
    cpu_us: float
    dominant: str
    dominant_decoded: str
    backend: str | None  # SDPA backend read off the aten ops, when SDPA ran


@dataclass
class Summary:
    """What the summary strip shows; plain data so it pickles across a ZeroGPU worker."""

    variant: str
    label: str
    config: dict[str, Any]
    device: str
    device_name: str
    torch_version: str
    ran: str  # what ran: SDPA backend read off the trace, or the kernel's source
    forwards: int
    kernels_per_forward: float
    memcpy_per_forward: float
    memset_per_forward: float
    gpu_us_per_forward: float | None
    cpu_us_per_forward: float
    cpu_bound: bool | None
    peak_mib: float | None
    flops_per_forward: float
    tflops: float | None
    tflops_basis: str
    rel_err: float | None
    rel_err_note: str
    dominant_kernel: str
    dominant_decoded: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def forward_spans(trace: Trace, name: str = FORWARD) -> pd.DataFrame:
    s = trace.spans
    return s[(s["kind"] == "cpu") & (s["name"] == name) & (s["category"] == "annotation")]


def gpu_work(trace: Trace) -> pd.DataFrame:
    s = trace.spans
    return s[(s["kind"] == "gpu") & s["category"].isin(GPU_WORK)]


def launched_within(trace: Trace, windows: pd.DataFrame) -> pd.DataFrame:
    """GPU work whose launch started inside one of `windows` (CPU spans on the same thread)."""
    work = gpu_work(trace)
    work = work[work["link"] >= 0]
    if work.empty or windows.empty:
        return work.iloc[0:0]
    launch = trace.spans.iloc[work["link"].to_numpy()]
    inside = np.zeros(len(work), dtype=bool)
    for (pid, tid), group in windows.groupby(["pid", "tid"], observed=True):
        w = group.sort_values("start_us")
        starts, ends = w["start_us"].to_numpy(), w["end_us"].to_numpy()
        same = ((launch["pid"] == pid) & (launch["tid"] == tid)).to_numpy()
        t = launch["start_us"].to_numpy()
        i = np.searchsorted(starts, t, side="right") - 1
        hit = same & (i >= 0) & (t <= ends[np.clip(i, 0, None)])
        inside |= hit
    return work[inside]


def sdpa_backend(trace: Trace, windows: pd.DataFrame | None = None) -> str | None:
    """Which SDPA backend ran, from the aten op it dispatched to (None when SDPA did not run)."""
    s = trace.spans
    ops = s[(s["kind"] == "cpu") & s["name"].isin(BACKEND_OPS)]
    if windows is not None and not windows.empty and not ops.empty:
        lo, hi = windows["start_us"].min(), windows["end_us"].max()
        ops = ops[(ops["start_us"] >= lo) & (ops["start_us"] <= hi)]
    found = list(dict.fromkeys(BACKEND_OPS[n] for n in ops["name"]))
    return " + ".join(found) if found else None


def forward_work(trace: Trace, name: str = FORWARD) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the forward windows, the GPU work they launched); ProfilerSteps stand in for missing
    `attn_fwd` spans, and with neither the whole trace is one window."""
    windows = forward_spans(trace, name)
    if windows.empty:
        windows = trace.steps()
    work = launched_within(trace, windows) if not windows.empty else gpu_work(trace)
    return windows, work


def per_forward(
    trace: Trace,
    name: str = FORWARD,
    windows: pd.DataFrame | None = None,
    work: pd.DataFrame | None = None,
) -> ForwardStats:
    """Averages over the recorded forwards (pass `forward_work`'s result to avoid redoing it)."""
    if windows is None or work is None:
        windows, work = forward_work(trace, name)
    n = max(len(windows), 1)
    counts = work["category"].value_counts()
    cpu_us = float(windows["dur_us"].mean()) if not windows.empty else float("nan")
    gpu_us = float(work["dur_us"].sum() / n) if trace.has_gpu else None
    dominant = dominant_decoded = ""
    if not work.empty:
        top = work.groupby("name", observed=True)["dur_us"].sum().idxmax()
        dominant, dominant_decoded = short_name(top), decode(top)
    elif not trace.has_gpu:
        ops = trace.spans[(trace.spans["category"] == "cpu op")]
        if not ops.empty:
            top = ops.groupby("name", observed=True)["self_us"].sum().idxmax()
            dominant, dominant_decoded = top, "CPU operator with the most self time (no GPU)"
    return ForwardStats(
        forwards=len(windows),
        kernels=float(counts.get("kernel", 0)) / n,
        memcpy=float(counts.get("memcpy", 0)) / n,
        memset=float(counts.get("memset", 0)) / n,
        gpu_us=gpu_us,
        cpu_us=cpu_us,
        dominant=dominant,
        dominant_decoded=dominant_decoded,
        backend=sdpa_backend(trace, windows),
    )


def _num(value: float | None, unit: str = "", digits: int = 1) -> str:
    if value is None or value != value:  # None or NaN
        return "n/a"
    return f"{value:,.{digits}f}{unit}"


def summary_rows(s: Summary) -> list[tuple[str, str]]:
    """The summary as (label, text) pairs: one formatting for the CLI, the page and the docs."""
    c = s.config
    bound = {True: "CPU-bound (CPU time per forward > GPU time)", False: "GPU-bound", None: "n/a"}
    rows = [
        ("variant", f"{s.variant} — {s.label}"),
        ("shape", f"B{c['batch']} H{c['heads']} S{c['seq_len']} D{c['head_dim']} {c['dtype']} "
                  f"{'causal' if c['causal'] else 'full'}"),
        ("ran", s.ran),
        ("device", f"{s.device_name} · torch {s.torch_version}"),
        ("kernels / forward", _num(s.kernels_per_forward, digits=2)),
        ("memcpy / memset per forward", f"{_num(s.memcpy_per_forward, digits=2)} / "
                                        f"{_num(s.memset_per_forward, digits=2)}"),
        ("GPU µs / forward", _num(s.gpu_us_per_forward)),
        ("CPU µs / forward", _num(s.cpu_us_per_forward)),
        ("bound", bound[s.cpu_bound]),
        ("peak memory", _num(s.peak_mib, " MiB") if s.peak_mib is not None else "n/a on CPU"),
        ("TFLOP/s", f"{_num(s.tflops, digits=2)} ({s.tflops_basis})"),
        ("rel. error vs float64", f"{s.rel_err:.2e} ({s.rel_err_note})" if s.rel_err is not None
                                  else "n/a"),
        ("dominant kernel", f"{s.dominant_kernel} — {s.dominant_decoded}" if s.dominant_kernel
                            else "n/a"),
        ("forwards recorded", str(s.forwards)),
    ]  # fmt: skip
    rows += [("note", n) for n in s.notes]
    return rows
