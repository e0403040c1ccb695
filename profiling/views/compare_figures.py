"""Plotly figures for Compare and Sweep, built from their plain results outside the GPU job.

Kept apart from profiling/gantt/spec.py on purpose (the single-run Gantt has its own needs); the
mini-Gantts here are deliberately simple: one horizontal bar trace per category per variant,
GPU lanes plus the attn_fwd (and attn_bwd) CPU spans, all on one shared time axis.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from profiling.jobs.compare import CompareResult
from profiling.jobs.sweep import STEP_PEAK, SweepResult
from profiling.text_tables import shape_text
from profiling.views.ran_on import (
    by_device,
    device_marker,
    device_symbols,
    devices_of,
    on_device,
    run_devices,
)
from profiling.views.text.summary import UNITS

CPU_SPANS = {
    "forward": "attn_fwd span",
    "backward": "attn_bwd span",
    "train": "attn_fwd + attn_bwd spans",
}  # what the CPU time of each mode spans
PHASE_COLORS = {"attn_fwd": "#7f7f7f", "attn_bwd": "#17becf"}  # the CPU spans, by phase
CATEGORY_COLORS = {
    **PHASE_COLORS,
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
    """Grouped bars: GPU µs and CPU µs per forward (per step of a training run, per backward
    measured alone) for each variant that ran."""
    t, x, split = _bar_places(result.glance[result.glance["status"] == "ok"])
    mode = result.shape.get("mode", "forward")
    per = UNITS.get(mode, "forward")
    fig = go.Figure()
    which = "%{customdata}" if split else "%{x}"
    bars = [("GPU", "kernels + memcpy + memset", "#1f77b4"),
            ("CPU", CPU_SPANS.get(mode, CPU_SPANS["forward"]), "#ff7f0e")]  # fmt: skip
    for side, counts, color in bars:
        if side == "GPU" and not t["GPU µs/fwd"].notna().any():
            continue  # a CPU run: no GPU bar at all
        fig.add_bar(
            name=f"{side} µs / {per} ({counts})",
            x=x,
            y=t[f"{side} µs/fwd"],
            marker_color=color,
            hovertemplate=f"{which}<br>{side} %{{y:,.1f}} µs / {per}<extra></extra>",
            **split,
        )
    where = "" if result.device == "cuda" else " — CPU run: no GPU time"
    fig.update_layout(
        barmode="group",
        title=f"GPU vs CPU time per {per} · {_shape(result.shape)}{where}",
        yaxis_title=f"µs per {per}",
        xaxis_title="variant, under the device it ran on" if split else "variant",
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 60, "l": 60, "r": 20, "b": 80},
    )
    return fig


def _bar_places(t: pd.DataFrame) -> tuple[pd.DataFrame, Any, dict[str, Any]]:
    """The bars' rows and x: the variants; on a mixed cluster (device, variant) pairs on a
    two-level axis, each device's variants side by side, and the hover's name for each."""
    places = devices_of(t)
    if not any(places):
        return t, t["variant"], {}
    order = {device: i for i, device in enumerate(dict.fromkeys(places))}
    t = t.assign(_on=places).sort_values("_on", key=lambda on: on.map(order), kind="stable")
    names = [on_device(v, d) for v, d in zip(t["variant"], t["_on"], strict=True)]
    return t, [list(t["_on"]), list(t["variant"])], {"customdata": names}


def mini_gantts(result: CompareResult, row_height: int = 110) -> go.Figure:
    """One small Gantt per variant that ran, stacked, sharing one time axis (µs from step 1)."""
    placed = zip(result.runs, run_devices([r.placement for r in result.runs]), strict=True)
    drawn = [(r, d) for r, d in placed if r.ok and r.timeline is not None and not r.timeline.empty]
    if not drawn:
        fig = go.Figure()
        fig.update_layout(title="No variant ran, so there is no timeline to draw")
        return fig
    runs = [r for r, _ in drawn]
    titles = [on_device(_run_title(r), device) for r, device in drawn]  # mixed: where it ran
    fig = make_subplots(
        rows=len(runs), cols=1, shared_xaxes=True, vertical_spacing=0.3 / len(runs),
        subplot_titles=titles,
    )  # fmt: skip
    shown: set[str] = set()
    for row, r in enumerate(runs, start=1):
        spans = r.timeline
        lanes = spans["lane"].where(spans["kind"] == "gpu", "CPU " + spans["name"].astype(str))
        for category, color in CATEGORY_COLORS.items():
            if category in PHASE_COLORS:
                mask = (spans["kind"] == "cpu") & (spans["name"] == category)
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
    """Log–log time per forward vs S. Points that did not run sit in a strip below the plot, on
    an axis of their own, so no stand-in value can be read as a measured time."""
    column = "GPU µs/fwd" if result.time_basis == "GPU" else "CPU µs/fwd"
    fig = _sweep_canvas(result)
    symbols = device_symbols(result.table)  # a mixed cluster: a line per variant and device
    for i, variant in enumerate(result.variants):
        mine = result.table[result.table["variant"] == variant]
        good = mine[(mine["status"] == "ok") & mine[column].notna()]
        for device, rows in by_device(good):
            name = on_device(variant, device)
            fig.add_scatter(
                x=rows["seq_len"], y=rows[column], mode="lines+markers", name=name,
                legendgroup=variant, line={"color": PALETTE[i % len(PALETTE)]},
                hovertemplate=f"{name}<br>S=%{{x}}<br>%{{y:,.1f}} µs<extra></extra>",
                row=1, col=1, **device_marker(symbols, device),
            )  # fmt: skip
    _add_misses(fig, result)
    what = "GPU µs per forward" if result.time_basis == "GPU" else "CPU µs per forward"
    where = "" if result.time_basis == "GPU" else " (no GPU on this machine)"
    _sweep_axes(fig, result, f"{what} (log)")
    fig.update_layout(title=f"{what} vs sequence length{where} · {_shape(result.shape)}")
    return fig


def sweep_memory_figure(result: SweepResult) -> go.Figure:
    """Log–log memory vs S: what the run used solid (a GPU's peak; on a CPU what one step
    allocated, issue 31), the estimate dotted as its own series (through refused lengths too:
    it is what refused them; one per variant on a mixed cluster too, as no device measured
    it); points that did not run in the strip below."""
    fig = _sweep_canvas(result)
    column, what = ("peak MiB", "peak") if result.device == "cuda" else (
        STEP_PEAK, "allocated in one step")  # fmt: skip
    symbols = device_symbols(result.table)  # a mixed cluster: measured lines per device
    for i, variant in enumerate(result.variants):
        color = PALETTE[i % len(PALETTE)]
        mine = result.table[result.table["variant"] == variant]
        measured = mine[(mine["status"] == "ok") & (mine[column] > 0)]
        for device, rows in by_device(measured) if not measured.empty else []:
            name = on_device(variant, device)
            fig.add_scatter(
                x=rows["seq_len"], y=rows[column], mode="lines+markers",
                name=f"{name} {what}", legendgroup=variant, line={"color": color},
                hovertemplate=f"{name}<br>S=%{{x}}<br>{what} %{{y:,.1f}} MiB<extra></extra>",
                row=1, col=1, **device_marker(symbols, device),
            )  # fmt: skip
        fig.add_scatter(
            x=mine["seq_len"], y=mine["est. MiB"], mode="lines", name=f"{variant} estimate",
            legendgroup=variant, line=estimate_line(i, len(result.variants), color),
            hovertemplate=f"{variant}<br>S=%{{x}}<br>estimate %{{y:,.3g}} MiB<extra></extra>",
            row=1, col=1,
        )  # fmt: skip
        _add_saved(fig, mine, variant, color, symbols)
    _add_misses(fig, result)
    measured_note = "" if result.device == "cuda" else (
        " (CPU: solid, what one step allocated; broken, its estimate)")  # fmt: skip
    _sweep_axes(fig, result, "MiB (log)")
    fig.update_layout(title=f"Memory vs sequence length · {_shape(result.shape)}{measured_note}")
    return fig


# Two variants with one memory model (naive and naive-inplace on a CPU) have the same
# estimate: each variant's line has its own dash, and the earlier ones are drawn wider, so a
# line on top of another leaves the one below showing along its edges (issue 42).
ESTIMATE_DASHES = ("dot", "dashdot", "longdashdot", "longdash")
ESTIMATE_WIDTH, ESTIMATE_WIDER = 2.0, 1.5  # the last variant's, and each earlier one's more


def estimate_line(index: int, count: int, color: str) -> dict[str, Any]:
    """The estimate's line of the `index`th of `count` variants."""
    width = ESTIMATE_WIDTH + ESTIMATE_WIDER * (count - 1 - index)
    return {"color": color, "dash": ESTIMATE_DASHES[index % len(ESTIMATE_DASHES)], "width": width}


def _add_saved(
    fig: go.Figure, points: pd.DataFrame, variant: str, color: str, symbols: dict[str, str]
) -> None:
    """A training sweep: what the forward saves for backward, dashed (S² for naive, S for a
    fused kernel's log-sum-exp). A point that saves nothing beyond its inputs has no log value."""
    if "saved MiB" not in points:
        return
    saved = points[(points["status"] == "ok") & (points["saved MiB"] > 0)]
    for device, rows in by_device(saved) if not saved.empty else []:
        name = on_device(variant, device)
        fig.add_scatter(
            x=rows["seq_len"], y=rows["saved MiB"], mode="lines+markers",
            name=f"{name} saved for backward", legendgroup=variant,
            line={"color": color, "dash": "dash"},
            marker=device_marker(symbols, device).get("marker", {"symbol": "diamond"}),
            hovertemplate=f"{name}<br>S=%{{x}}<br>saved for backward %{{y:,.1f}} MiB"
            "<extra></extra>", row=1, col=1,
        )  # fmt: skip


SWEEP_PLOT_PX = 320  # the data's plot area; the strip of missed points adds its own height
SWEEP_MARGIN = {"t": 60, "l": 70, "r": 20, "b": 60}
STRIP_ROW_PX, STRIP_GAP_PX = 26, 56  # one row per variant that missed; gap holds its title
STRIP_TITLE = "did not run (hover a marker for the reason)"


def missed_variants(result: SweepResult) -> list[str]:
    """The variants with at least one point that did not run, in the sweep's order."""
    missed = set(result.table.loc[result.table["status"] != "ok", "variant"])
    return [v for v in result.variants if v in missed]


def _sweep_canvas(result: SweepResult) -> go.Figure:
    """The data's log–log plot, and below it, when a point did not run, a strip with one row
    per such variant: a marker there has no time or memory value to misread."""
    missed = missed_variants(result)
    margin = SWEEP_MARGIN["t"] + SWEEP_MARGIN["b"]
    if not missed:
        fig = make_subplots(rows=1, cols=1)
        fig.update_layout(height=SWEEP_PLOT_PX + margin, margin=SWEEP_MARGIN)
        return fig
    strip = STRIP_ROW_PX * len(missed) + 16
    inner = SWEEP_PLOT_PX + STRIP_GAP_PX + strip
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[SWEEP_PLOT_PX, strip],
        vertical_spacing=STRIP_GAP_PX / inner, subplot_titles=("", STRIP_TITLE),
    )  # fmt: skip
    fig.update_annotations(font={"size": 12})
    fig.update_yaxes(
        type="category", categoryorder="array", categoryarray=missed,
        range=[len(missed) - 0.5, -0.5], showgrid=False, row=2, col=1,
    )  # fmt: skip
    fig.update_layout(height=inner + margin, margin=SWEEP_MARGIN)
    return fig


def _sweep_axes(fig: go.Figure, result: SweepResult, y_title: str) -> None:
    """Log axes with at least three labelled ticks each; the x title under the lowest row."""
    fig.update_xaxes(type="log", **length_ticks(result.seq_lens))
    rows = 2 if missed_variants(result) else 1
    fig.update_xaxes(title_text="sequence length S", row=rows, col=1)
    data = [t for t in fig.data if t.yaxis in (None, "y") and t.y is not None]
    values = [y for t in data for y in t.y]
    fig.update_yaxes(type="log", title_text=y_title, **log_ticks(values), row=1, col=1)


def length_ticks(seq_lens: list[int]) -> dict[str, Any]:
    """Every swept length as an x tick; with fewer than three, their halves and doubles are
    added (and the range fixed to show them) so the log axis still reads as one."""
    ticks = sorted({int(s) for s in seq_lens})
    if not ticks:
        return {}
    if len(ticks) == 1:
        ticks = [ticks[0] / 2, ticks[0], ticks[0] * 2]
    elif len(ticks) == 2:
        ticks = [ticks[0] / 2, *ticks]
    edge = 0.08  # decades beyond the outer ticks, room for their markers
    return {
        "tickvals": ticks,
        "ticktext": [f"{t:g}" for t in ticks],
        "range": [math.log10(ticks[0]) - edge, math.log10(ticks[-1]) + edge],
    }


TICK_MANTISSAS = ((1,), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9))  # coarse to fine
MAX_TICKS = 10


def log_ticks(values: Iterable[Any]) -> dict[str, Any]:
    """Round ticks for a log axis over `values`, at least three, each labelled in full (20k,
    50k): plotly's own label the in-between ones with a bare digit ("2" for 2k or 20k), and a
    narrow range got a single tick. The range is fixed so every tick is on screen."""
    finite = [float(v) for v in values if _positive(v)]
    if not finite:
        return {}
    low, high = min(finite) / 1.4, max(finite) * 1.4
    if high / low < 4:  # narrow: widen about the middle, so three round values fit
        middle = math.sqrt(low * high)
        low, high = middle / 2, middle * 2
    candidates = [_ticks_between(low, high, m) for m in TICK_MANTISSAS]
    usable = [ticks for ticks in candidates if len(ticks) >= 3]
    # the finest set that stays readable, else the coarsest that still has three
    ticks = next((t for t in reversed(usable) if len(t) <= MAX_TICKS), usable[0])
    return {
        "tickvals": ticks,
        "ticktext": [_si(v) for v in ticks],
        "range": [math.log10(low), math.log10(high)],
    }


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _ticks_between(low: float, high: float, mantissas: tuple[float, ...]) -> list[float]:
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    values = [float(f"{m * 10.0**k:.6g}") for k in decades for m in mantissas]
    return [v for v in values if low <= v <= high]


def _si(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _add_misses(fig: go.Figure, result: SweepResult) -> None:
    """Points that did not run, in the strip: one row per variant, one marker trace per
    status (its symbol), the reason in the hover (and on a mixed cluster the device, where
    one ran it). No text on the plot, so none can overlap."""
    for i, variant in enumerate(result.variants):
        color = PALETTE[i % len(PALETTE)]
        mine = result.table[(result.table["variant"] == variant) & (result.table["status"] != "ok")]
        for status, group in mine.groupby("status", sort=False):
            where = zip(group["reason"].fillna(""), devices_of(group), strict=True)
            reasons = [[_hover_lines(f"on {d}: {r}" if d else str(r))] for r, d in where]
            fig.add_scatter(
                x=group["seq_len"], y=[variant] * len(group), mode="markers",
                name=f"{variant} {status}", legendgroup=variant,
                marker={"symbol": STATUS_SYMBOLS.get(str(status), "x"), "size": 12,
                        "color": color, "line": {"width": 2, "color": color}},
                text=[str(status)] * len(group), customdata=reasons,
                hovertemplate=f"{variant} S=%{{x}}: %{{text}}<br>%{{customdata[0]}}<extra></extra>",
                row=2, col=1,
            )  # fmt: skip


def _hover_lines(reason: str, width: int = 70) -> str:
    """A reason as hover text: escaped, and broken into lines (a hover box does not wrap)."""
    return "<br>".join(textwrap.wrap(html.escape(reason), width)) or "no reason recorded"


def _run_title(r) -> str:
    s = r.summary
    gpu = f"GPU {s.gpu_us_per_forward:,.0f} µs" if s.gpu_us_per_forward is not None else "no GPU"
    per = UNITS.get(s.mode, "forward")
    return f"{r.variant} · {gpu} · CPU {s.cpu_us_per_forward:,.0f} µs per {per}"


def _shape(c: dict) -> str:
    return shape_text(c)
