"""Plotly figures for Compare and Sweep, built from their plain results outside the GPU job.

Kept apart from profiling/gantt.py on purpose (the single-run Gantt has its own needs); the
mini-Gantts here are deliberately simple: one horizontal bar trace per category per variant,
GPU lanes plus the attn_fwd CPU spans, all on one shared time axis.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from profiling.compare import CompareResult
from profiling.sweep import SweepResult

CATEGORY_COLORS = {
    "attn_fwd": "#7f7f7f",
    "kernel": "#1f77b4",
    "memcpy": "#d62728",
    "memset": "#ff7f0e",
}
STATUS_SYMBOLS = {
    "refused": "x",
    "oom": "x-thin-open",
    "unavailable": "circle-open",
    "failed": "diamond-open",
    "skipped": "line-ew-open",
}
PALETTE = qualitative.Plotly


def gpu_cpu_bars(result: CompareResult) -> go.Figure:
    """Grouped bars: GPU µs and CPU µs per forward for each variant that ran."""
    t = result.glance[result.glance["status"] == "ok"]
    fig = go.Figure()
    if t["GPU µs/fwd"].notna().any():
        fig.add_bar(
            name="GPU µs / forward (kernels + memcpy + memset)",
            x=t["variant"],
            y=t["GPU µs/fwd"],
            marker_color="#1f77b4",
            hovertemplate="%{x}<br>GPU %{y:,.1f} µs / forward<extra></extra>",
        )
    fig.add_bar(
        name="CPU µs / forward (attn_fwd span)",
        x=t["variant"],
        y=t["CPU µs/fwd"],
        marker_color="#ff7f0e",
        hovertemplate="%{x}<br>CPU %{y:,.1f} µs / forward<extra></extra>",
    )
    where = "" if result.device == "cuda" else " — CPU run: no GPU time"
    fig.update_layout(
        barmode="group",
        title=f"GPU vs CPU time per forward · {_shape(result.shape)}{where}",
        yaxis_title="µs per forward",
        xaxis_title="variant",
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 60, "l": 60, "r": 20, "b": 80},
    )
    return fig


def mini_gantts(result: CompareResult, row_height: int = 110) -> go.Figure:
    """One small Gantt per variant that ran, stacked, sharing one time axis (µs from step 1)."""
    runs = [r for r in result.ran if r.timeline is not None and not r.timeline.empty]
    if not runs:
        fig = go.Figure()
        fig.update_layout(title="No variant ran, so there is no timeline to draw")
        return fig
    titles = [_run_title(r) for r in runs]
    fig = make_subplots(
        rows=len(runs), cols=1, shared_xaxes=True, vertical_spacing=0.3 / len(runs),
        subplot_titles=titles,
    )  # fmt: skip
    shown: set[str] = set()
    for row, r in enumerate(runs, start=1):
        spans = r.timeline
        lanes = spans["lane"].where(spans["kind"] == "gpu", "CPU attn_fwd")
        for category, color in CATEGORY_COLORS.items():
            if category == "attn_fwd":
                mask = spans["kind"] == "cpu"
            else:
                mask = (spans["kind"] == "gpu") & (spans["category"] == category)
            if not mask.any():
                continue
            part = spans[mask]
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    base=part["start_us"],
                    x=part["dur_us"],
                    y=lanes[mask],
                    name=category,
                    legendgroup=category,
                    showlegend=category not in shown,
                    marker={"color": color, "line": {"width": 0}},
                    customdata=part[["name"]].to_numpy(),
                    hovertemplate="%{customdata[0]}<br>start %{base:,.1f} µs, %{x:,.1f} µs"
                    "<extra></extra>",
                ),
                row=row,
                col=1,
            )
            shown.add(category)
        fig.update_yaxes(autorange="reversed", row=row, col=1)
    fig.update_xaxes(title_text="µs since the first active ProfilerStep", row=len(runs), col=1)
    fig.update_layout(
        barmode="overlay",
        height=max(300, row_height * len(runs) + 120),
        title=f"Timelines · {_shape(result.shape)}",
        margin={"t": 80, "l": 140, "r": 20, "b": 50},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
    )
    return fig


def sweep_time_figure(result: SweepResult) -> go.Figure:
    """Log–log time per forward vs S; points that did not run drawn as labelled markers on top."""
    column = "GPU µs/fwd" if result.time_basis == "GPU" else "CPU µs/fwd"
    ok = result.table[(result.table["status"] == "ok") & result.table[column].notna()]
    top = _top(ok[column])
    fig = go.Figure()
    for i, variant in enumerate(result.variants):
        color = PALETTE[i % len(PALETTE)]
        mine = result.table[result.table["variant"] == variant]
        good = mine[(mine["status"] == "ok") & mine[column].notna()]
        fig.add_scatter(
            x=good["seq_len"], y=good[column], mode="lines+markers", name=variant,
            legendgroup=variant, line={"color": color},
            hovertemplate=f"{variant}<br>S=%{{x}}<br>%{{y:,.1f}} µs<extra></extra>",
        )  # fmt: skip
        # one row per variant above the data, so two variants' misses never hide each other
        _add_misses(fig, mine[mine["status"] != "ok"], variant, color, y=top * 1.35**i)
    what = "GPU µs per forward" if result.time_basis == "GPU" else "CPU µs per forward"
    where = "" if result.time_basis == "GPU" else " (no GPU on this machine)"
    fig.update_layout(
        title=f"{what} vs sequence length{where} · {_shape(result.shape)}",
        xaxis={"type": "log", "title": "sequence length S", "tickvals": result.seq_lens},
        yaxis={"type": "log", "title": f"{what} (log)", **log_ticks(fig)},
        margin={"t": 60, "l": 70, "r": 20, "b": 60},
    )
    return fig


def sweep_memory_figure(result: SweepResult) -> go.Figure:
    """Log–log memory vs S: measured peak (GPU) solid, the estimate dotted, refusals at the
    estimate that refused them."""
    t = result.table
    fig = go.Figure()
    for i, variant in enumerate(result.variants):
        color = PALETTE[i % len(PALETTE)]
        mine = t[t["variant"] == variant]
        measured = mine[(mine["status"] == "ok") & mine["peak MiB"].notna()]
        if not measured.empty:
            fig.add_scatter(
                x=measured["seq_len"], y=measured["peak MiB"], mode="lines+markers",
                name=f"{variant} peak", legendgroup=variant, line={"color": color},
                hovertemplate=f"{variant}<br>S=%{{x}}<br>peak %{{y:,.0f}} MiB<extra></extra>",
            )  # fmt: skip
        fig.add_scatter(
            x=mine["seq_len"], y=mine["est. MiB"], mode="lines", name=f"{variant} estimate",
            legendgroup=variant, line={"color": color, "dash": "dot"},
            hovertemplate=f"{variant}<br>S=%{{x}}<br>estimate %{{y:,.0f}} MiB<extra></extra>",
        )  # fmt: skip
        _add_misses(fig, mine[mine["status"] != "ok"], variant, color, y=None)
    measured_note = "" if result.device == "cuda" else " (CPU: estimate only, no peak measured)"
    fig.update_layout(
        title=f"Memory vs sequence length · {_shape(result.shape)}{measured_note}",
        xaxis={"type": "log", "title": "sequence length S", "tickvals": result.seq_lens},
        yaxis={"type": "log", "title": "MiB (log)", **log_ticks(fig)},
        margin={"t": 60, "l": 70, "r": 20, "b": 60},
    )
    return fig


def log_ticks(fig: go.Figure) -> dict[str, list]:
    """Ticks at 1, 2 and 5 of each decade the data spans, each labelled in full (20k, 50k):
    plotly's own log ticks label the in-between ones with a bare digit, so "2" meant 2k or 20k."""
    ys = [float(y) for t in fig.data for y in (t.y if t.y is not None else ())
          if isinstance(y, int | float) and math.isfinite(y) and y > 0]  # fmt: skip
    if not ys:
        return {}
    lo, hi = min(ys) / 1.4, max(ys) * 1.4
    values = [
        m * 10.0**k
        for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for m in (1, 2, 5)
        if lo <= m * 10.0**k <= hi
    ]
    return {"tickvals": values, "ticktext": [_si(v) for v in values]} if len(values) >= 2 else {}


def _si(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _add_misses(
    fig: go.Figure, misses: pd.DataFrame, variant: str, color: str, y: float | None
) -> None:
    """Points that did not run, one marker trace per status, labelled with the status."""
    for status, group in misses.groupby("status", sort=False):
        ys = group["est. MiB"] if y is None else [y] * len(group)
        fig.add_scatter(
            x=group["seq_len"],
            y=ys,
            mode="markers+text",
            name=f"{variant} {status}",
            legendgroup=variant,
            marker={"symbol": STATUS_SYMBOLS.get(str(status), "x"), "size": 12, "color": color,
                    "line": {"width": 2, "color": color}},
            text=[str(status)] * len(group),
            textposition="top center",
            customdata=group[["reason"]].to_numpy(),
            hovertemplate=f"{variant} S=%{{x}}: {status}<br>%{{customdata[0]}}<extra></extra>",
        )  # fmt: skip


def _top(values: pd.Series) -> float:
    """A y just above the highest point on a log axis (where missed points are drawn)."""
    finite = values[values > 0]
    return float(10 ** (math.log10(finite.max()) + 0.3)) if not finite.empty else 1.0


def _run_title(r) -> str:
    s = r.summary
    gpu = f"GPU {s.gpu_us_per_forward:,.0f} µs" if s.gpu_us_per_forward is not None else "no GPU"
    return f"{r.variant} · {gpu} · CPU {s.cpu_us_per_forward:,.0f} µs per forward"


def _shape(c: dict) -> str:
    mask = "causal" if c.get("causal") else "full"
    s = f" S{c['seq_len']}" if "seq_len" in c else ""
    return f"B{c['batch']} H{c['heads']}{s} D{c['head_dim']} {c['dtype']} {mask}"
