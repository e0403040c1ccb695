"""The roofline chart: every kernel a point at (FLOP/byte, achieved TFLOP/s) under the device's
roofs, as plain dicts (profiling.gantt.spec.FigureSpec; plotly is imported only to build a Figure).

Log-log axes. The memory roof is the slope TB/s × FLOP/byte; each compute ceiling of
analysis.peaks.roofs (FP32 on CUDA cores, TF32 and BF16/FP16 tensor cores) is flat from its
ridge on; the ceiling of the run's dtype is drawn solid, the others dotted. A point's area
grows with the kernel's total time (sqrt of time for the diameter, bounded so a 1 µs kernel
stays visible and a long one does not hide the rest). Compare passes every variant's rows
with a "variant" column: one trace (one colour) per variant.

Left off the chart, and counted in its note: kernels not placed (no FLOPs or bytes: the table
says why) and kernels doing no FLOPs (copies, memsets, fills): a log TFLOP/s axis has no
zero, and a floor value would draw a copy as doing arithmetic it does not do. Their TB/s is
in the table and the note.
"""

from __future__ import annotations

import html
import math
import textwrap
from typing import Any

import pandas as pd

from profiling.analysis.peaks import peak_bandwidth, roof_label, roofs
from profiling.gantt.spec import FigureSpec
from profiling.kernels.names import decode, short_name

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f")  # fmt: skip
MIN_MARKER, MAX_MARKER = 6.0, 40.0  # px diameter of the shortest and the longest kernel
ROOF_COLOUR = "#444444"
X_TITLE = "arithmetic intensity (FLOP/byte)"
Y_TITLE = "achieved TFLOP/s"
SINGLE = "kernels"  # the trace's name when the rows have no "variant" column


def roofline_spec(
    points: pd.DataFrame, device_name: str, dtype: str, *, own_run: bool = False
) -> FigureSpec:
    """The chart for roofline rows (profiling.kernels.roofline.roofline_rows, plus an optional
    "variant" column). `own_run` adds this app's context to the decoded names. With no rows
    at all the chart says why it is empty instead of drawing roofs with nothing under them."""
    if points.empty:
        return _no_kernels(device_name, dtype)
    placed = _drawable(points)
    skipped = len(points) - len(placed)
    intensities = placed["intensity"].astype(float).tolist() + _measured_x(placed)
    rates = placed["tflops"].astype(float).tolist()
    bandwidth = peak_bandwidth(device_name)
    ceilings = roofs(device_name)
    x_low, x_high = _x_range(intensities, ceilings, bandwidth)
    data = _roof_traces(ceilings, bandwidth, roof_label(device_name, dtype), x_low, x_high)
    data += _point_traces(placed, own_run)
    data += measured_traces(placed)
    y_values = rates + [value for _, value in ceilings]
    y_low = min([*y_values, 1.0]) / 3
    y_high = max([*y_values, 1.0]) * 3
    layout: dict[str, Any] = {
        "title": {"text": f"Roofline · {device_name or 'unknown device'} · "
                          f"{dtype or 'dtype not recorded'}"},
        "xaxis": {"type": "log", "title": {"text": X_TITLE},
                  "range": [math.log10(x_low), math.log10(x_high)]},
        "yaxis": {"type": "log", "title": {"text": Y_TITLE},
                  "range": [math.log10(y_low), math.log10(y_high)],
                  **log_ticks(y_low, y_high)},
        "hovermode": "closest",
        "legend": {"orientation": "h", "y": -0.2},
        "height": 520,
    }  # fmt: skip
    note = _note(points, placed, skipped, device_name, bool(ceilings))
    lines = note["text"].count("<br>") + 1  # the top margin holds the title and every line
    layout |= {"annotations": [note], "margin": {"t": NOTE_TOP_PX + NOTE_LINE_PX * lines}}
    return FigureSpec(data=data, layout=layout)


def log_ticks(low: float, high: float) -> dict[str, Any]:
    """Round ticks over [low, high], each labelled in full: 1, 2 and 5 per decade over a few
    decades, the decades alone over more. Plotly's own ticks over the one decade of an empty
    chart labelled every 0.2 and crowded the top of the axis into overlapping labels."""
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    mantissas = (1, 2, 5) if math.log10(high / low) < 3 else (1,)
    values = [float(f"{m * 10.0**k:.6g}") for k in decades for m in mantissas]
    ticks = [v for v in values if low <= v <= high]
    return {"tickvals": ticks, "ticktext": [f"{v:,g}" for v in ticks]}


def marker_sizes(total_us: list[float]) -> list[float]:
    """Diameters growing with the square root of time (area ∝ time), bounded."""
    longest = max(total_us, default=0.0)
    if longest <= 0:
        return [MIN_MARKER for _ in total_us]
    span = MAX_MARKER - MIN_MARKER
    return [MIN_MARKER + span * math.sqrt(max(t, 0.0) / longest) for t in total_us]


def _drawable(points: pd.DataFrame) -> pd.DataFrame:
    """Rows with FLOPs > 0, bytes > 0 and time: the ones a log-log chart can place."""
    if points.empty:
        return points
    intensity = pd.to_numeric(points["intensity"], errors="coerce")
    rate = pd.to_numeric(points["tflops"], errors="coerce")
    return points[(intensity > 0) & (rate > 0)]


def _x_range(
    intensities: list[float], ceilings: list[tuple[str, float]], bandwidth: float | None
) -> tuple[float, float]:
    ridges = [value / bandwidth for _, value in ceilings] if bandwidth else []
    values = intensities + ridges
    low = min([*values, 0.1]) / 3
    high = max([*values, 100.0]) * 3
    return low, high


def _roof_traces(
    ceilings: list[tuple[str, float]],
    bandwidth: float | None,
    solid: str | None,
    x_low: float,
    x_high: float,
) -> list[dict[str, Any]]:
    """The memory slope up to the highest ridge, then each ceiling flat from its ridge."""
    if not ceilings or not bandwidth:
        return []
    top = max(value for _, value in ceilings)
    traces = [_line([x_low, top / bandwidth], [bandwidth * x_low, top],
                    f"memory {bandwidth:g} TB/s", "solid")]  # fmt: skip
    for label, value in ceilings:
        ridge = value / bandwidth
        dash = "solid" if label == solid else "dot"
        traces.append(_line([ridge, x_high], [value, value], f"{label} {value:g} TFLOP/s", dash))
    return traces


def _line(x: list[float], y: list[float], name: str, dash: str) -> dict[str, Any]:
    return {
        "type": "scatter", "mode": "lines", "x": x, "y": y, "name": name,
        "line": {"color": ROOF_COLOUR, "dash": dash, "width": 2 if dash == "solid" else 1},
        "hovertemplate": f"{html.escape(name)}<extra></extra>",
    }  # fmt: skip


def _point_traces(placed: pd.DataFrame, own_run: bool) -> list[dict[str, Any]]:
    if placed.empty:
        return []
    variants = placed["variant"] if "variant" in placed else pd.Series(SINGLE, index=placed.index)
    sizes = dict(zip(placed.index, marker_sizes(placed["total_us"].astype(float).tolist()),
                     strict=True))  # fmt: skip
    traces = []
    for number, variant in enumerate(dict.fromkeys(variants.astype(str))):
        rows = placed[variants.astype(str) == variant]
        traces.append({
            "type": "scatter", "mode": "markers", "name": variant,
            "x": rows["intensity"].astype(float).tolist(),
            "y": rows["tflops"].astype(float).tolist(),
            "marker": {"size": [sizes[i] for i in rows.index],
                       "color": PALETTE[number % len(PALETTE)], "opacity": 0.75,
                       "line": {"width": 1, "color": "#ffffff"}},
            "text": [_hover(variant, row, own_run) for _, row in rows.iterrows()],
            "hovertemplate": "%{text}<extra></extra>",
        })  # fmt: skip
    return traces


MEASURED_NAME = "measured DRAM bytes (ncu)"
LINK_NAME = "modelled → measured"
MEASURED_COLOUR = "#111111"


def _measured_x(placed: pd.DataFrame) -> list[float]:
    if "measured_intensity" not in placed:
        return []
    values = pd.to_numeric(placed["measured_intensity"], errors="coerce")
    return values[values > 0].astype(float).tolist()


def measured_traces(placed: pd.DataFrame) -> list[dict[str, Any]]:
    """Issue 36: each measured kernel again at the intensity its DRAM bytes under ncu give (the
    same FLOPs and profiler time: the same height), linked to its modelled point."""
    if "measured_intensity" not in placed:
        return []
    intensity = pd.to_numeric(placed["measured_intensity"], errors="coerce")
    rows = placed[intensity > 0]
    if rows.empty:
        return []
    link_x: list[float | None] = []
    link_y: list[float | None] = []
    for modelled, measured, rate in zip(rows["intensity"].astype(float),
                                        rows["measured_intensity"].astype(float),
                                        rows["tflops"].astype(float), strict=True):  # fmt: skip
        link_x += [modelled, measured, None]
        link_y += [rate, rate, None]
    link = {"type": "scatter", "mode": "lines", "name": LINK_NAME, "x": link_x, "y": link_y,
            "line": {"color": MEASURED_COLOUR, "dash": "dot", "width": 1},
            "hoverinfo": "skip"}  # fmt: skip
    points = {
        "type": "scatter", "mode": "markers", "name": MEASURED_NAME,
        "x": rows["measured_intensity"].astype(float).tolist(),
        "y": rows["tflops"].astype(float).tolist(),
        "marker": {"symbol": "diamond-open", "size": 12, "color": MEASURED_COLOUR,
                   "line": {"width": 2, "color": MEASURED_COLOUR}},
        "text": [f"<b>{html.escape(short_name(str(row['name'])))}</b><br>"
                 f"{html.escape(str(row['bytes_gap']))}<br>"
                 f"{row['measured_intensity']:,.2f} FLOP/byte from ncu's DRAM bytes"
                 for _, row in rows.iterrows()],
        "hovertemplate": "%{text}<extra></extra>",
    }  # fmt: skip
    return [link, points]


def _hover(variant: str, row: pd.Series, own_run: bool) -> str:
    name = str(row["name"])
    decoded = decode(name, own_run=own_run) or "(no reading of this name)"
    title = f"<b>{html.escape(short_name(name))}</b>"
    lines = [
        title + (f" · {html.escape(variant)}" if variant != SINGLE else ""),
        html.escape(decoded),
        f"role: {html.escape(str(row['role']) or '—')} · {html.escape(str(row['phase']))}",
        f"{row['calls']:g} calls · {row['mean_us']:,.1f} µs each · {row['total_us']:,.1f} µs total",
        f"{row['tflops']:,.2f} TFLOP/s · {row['tbps']:,.3f} TB/s",
        f"{row['intensity']:,.2f} FLOP/byte",
        f"bound: {html.escape(str(row['bound']))}",
        f"from: {html.escape(str(row['source']))}",
    ]  # fmt: skip
    return "<br>".join(lines)


# The note above the chart, wrapped: on one line it ran past the chart's right edge and was cut
# off (a trace's four long no-FLOP kernel names, issue 42). 100 characters of 11 px text fit a
# 700 px chart; the top margin grows a line's height for each line, under the title.
NOTE_CHARS, NOTE_TOP_PX, NOTE_LINE_PX = 100, 64, 15


def _note(
    points: pd.DataFrame, placed: pd.DataFrame, skipped: int, device_name: str, has_roofs: bool
) -> dict[str, Any]:
    """What the chart does not show, said on it: the kernels left off and why."""
    parts = [f"{len(placed)} kernel rows drawn"]
    if skipped:
        left = points.drop(index=placed.index)
        flops = pd.to_numeric(left["flop_per_call"], errors="coerce")
        zero = left[flops == 0]
        unplaced = len(left) - len(zero)
        if len(zero):
            rates = pd.to_numeric(zero["tbps"], errors="coerce")
            listed = ", ".join(
                f"{short_name(str(n))} {r:.2f} TB/s" if pd.notna(r) else short_name(str(n))
                for n, r in list(zip(zero["name"], rates, strict=True))[:4]
            )
            listed += " …" if len(zero) > 4 else ""
            parts.append(f"{len(zero)} with no FLOPs left off (a log axis has no zero): {listed}")
        if unplaced:
            parts.append(f"{unplaced} not placed (see the table's source column)")
    if not has_roofs:
        parts.append(f"no datasheet roofs for {device_name or 'this device'}")
    lines = textwrap.wrap(" · ".join(parts), NOTE_CHARS, break_on_hyphens=False)
    return {
        "text": "<br>".join(html.escape(line, quote=False) for line in lines), "xref": "paper",
        "yref": "paper", "x": 0, "y": 1.0, "yanchor": "bottom", "yshift": 4,
        "showarrow": False, "align": "left", "font": {"size": 11},
    }  # fmt: skip


NO_KERNELS = (
    "No roofline: there are no GPU kernels to place on it (a CPU run's work is CPU operators, "
    "see the operator table)"
)


def _no_kernels(device_name: str, dtype: str) -> FigureSpec:
    """An empty chart that says why it is empty: no axes, no roofs, one line in its middle."""
    hidden = {"visible": False}
    layout: dict[str, Any] = {
        "title": {"text": f"Roofline · {device_name or 'unknown device'} · "
                          f"{dtype or 'dtype not recorded'}"},
        "xaxis": hidden, "yaxis": hidden, "height": 220, "plot_bgcolor": "rgba(0,0,0,0)",
        "annotations": [{"text": NO_KERNELS, "xref": "paper", "yref": "paper", "x": 0.5,
                         "y": 0.5, "showarrow": False, "font": {"size": 14}}],
    }  # fmt: skip
    return FigureSpec(data=[], layout=layout)
