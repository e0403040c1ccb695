"""What the page shows of issue 23: the timing block under the summary strip (the spread, eager
vs CUDA graph side by side, the clocks), the memory timeline (plotly) and its breakdown table,
and Compare's memory peaks side by side. Pure (no gradio), so the API and tests see the same.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from profiling.analysis.memory_timeline import CATEGORIES, Timeline
from profiling.analysis.summary import Summary
from profiling.views.shared import escaped
from profiling.views.text.summary import unit
from profiling.views.text.timing import NO_GPU_MEMORY, timing_rows

COLOURS = dict(zip(CATEGORIES, qualitative.Safe, strict=False))
BREAKDOWN_COLUMNS = ["what", "MiB at peak", "blocks at peak", "MiB allocated in the step",
                     "made by"]  # fmt: skip
GRAPH_CANNOT = (
    "A CUDA graph's trace shows each replayed kernel, linked to the phase's one cudaGraphLaunch, "
    "so the per-step figures and the kernel table hold. It cannot show the CPU side inside the "
    "graph: no aten op (for SDPA, no backend op: read the kernel names), no per-kernel launch "
    "or launch delay, and no graph node ids (torch.profiler does not write them)."
)


def timing_html(summary: Summary) -> str:
    """The timing rows and, for a graph run, eager vs CUDA graph side by side."""
    per = unit(summary)
    rows = "".join(
        f"<dt>{escaped(label)}</dt><dd>{escaped(text)}</dd>"
        for label, text in timing_rows(summary, per)
    )
    side = _side_by_side(summary.launch_compare, per) if summary.launch_compare else ""
    cannot = f'<div class="ap-note">{escaped(GRAPH_CANNOT)}</div>' if side else ""
    title = '<div class="ap-launch-title">Timing, clocks and memory</div>'
    return f'<div class="ap-launch ap-timing">{title}<dl>{rows}</dl>{side}{cannot}</div>'


def _side_by_side(compared: dict[str, Any], per: str) -> str:
    """Eager and replayed, timed without the profiler: what the CPU pays to issue a step."""
    eager, graph = compared["eager"], compared["cuda-graph"]
    cells = [
        (f"host µs to issue one {per} (median of {eager['host_us']['n']})",
         eager["host_us"]["median"], graph["host_us"]["median"]),
        (f"µs per {per}, back to back (GPU clock)", eager["wall_us"], graph["wall_us"]),
    ]  # fmt: skip
    body = "".join(
        f"<tr><td>{escaped(label)}</td><td>{a:,.1f}</td><td>{b:,.1f}</td></tr>"
        for label, a, b in cells
    )
    bound = ""
    if eager["host_us"]["median"] > eager["wall_us"] * 0.9:
        bound = (
            '<div class="ap-note">Eager, the CPU takes about as long to issue a step as the GPU '
            "takes to run it: CPU-bound; the graph moves that cost off the CPU.</div>"
        )
    return (
        '<table class="ap-side"><tr><th></th><th>eager</th><th>CUDA graph</th></tr>'
        f"{body}</table>{bound}"
    )


def memory_table(summary: Summary) -> pd.DataFrame:
    """The breakdown at the peak, one row per kind of allocation (empty on a CPU)."""
    rows = (summary.memory or {}).get("breakdown") or []
    table = pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS)
    for column in ("MiB at peak", "MiB allocated in the step"):
        table[column] = table[column].astype(float).round(1)
    return table


def memory_note(summary: Summary) -> str:
    """What the timeline shows, or why there is none."""
    if summary.device != "cuda":
        return f"Memory timeline: {NO_GPU_MEMORY}. On the GPU it draws memory over one step."
    memory = summary.memory or {}
    if "peak_mib" not in memory:
        return f"Memory timeline: n/a ({memory.get('error', 'not recorded')})."
    graph = (
        " (the eager step: a graph replay allocates nothing)"
        if summary.timing == "cuda-graph"
        else ""
    )
    return (
        f"Memory in use over one {unit(summary)}{graph}, from the CUDA allocator's history: peak "
        f"{memory['peak_mib']:,.1f} MiB, `torch.cuda.max_memory_allocated` "
        f"{memory['max_memory_allocated_mib']:,.1f} MiB. The snapshot opens in "
        "[PyTorch's memory visualiser](https://pytorch.org/memory_viz)."
    )


def timeline_json(timeline: Timeline | None) -> dict[str, Any] | None:
    """The timeline for API callers: x, and MiB in use per kind of allocation (None: a CPU)."""
    if timeline is None:
        return None
    return {
        "x": timeline.x,
        "x_label": timeline.x_label,
        "mib": {name: [v / 1024**2 for v in values] for name, values in timeline.series.items()},
        "peak_mib": timeline.peak_bytes / 1024**2,
    }


def memory_figure(timeline: Timeline | None, title: str = "") -> go.Figure:
    """Memory in use over the step, stacked by what it is, the peak marked."""
    figure = go.Figure()
    if timeline is None or not timeline.x:
        figure.add_annotation(text=NO_GPU_MEMORY, showarrow=False, x=0.5, y=0.5,
                              xref="paper", yref="paper")  # fmt: skip
        figure.update_layout(height=200, xaxis_visible=False, yaxis_visible=False)
        return figure
    for name, values in timeline.series.items():
        figure.add_trace(
            go.Scatter(
                x=timeline.x, y=[v / 1024**2 for v in values], name=name, mode="lines",
                line={"shape": "hv", "width": 0.5, "color": COLOURS.get(name)},
                stackgroup="memory", hovertemplate="%{y:,.1f} MiB<extra>" + name + "</extra>",
            )
        )  # fmt: skip
    peak_x, peak_mib = timeline.x[timeline.peak_index], timeline.peak_bytes / 1024**2
    marker = {"symbol": "triangle-down", "size": 12, "color": "black"}
    figure.add_trace(go.Scatter(x=[peak_x], y=[peak_mib], mode="markers+text", name="peak",
                                text=[f"peak {peak_mib:,.1f} MiB"], textposition="top center",
                                marker=marker))  # fmt: skip
    figure.update_layout(
        title=title or None,
        height=380,
        margin={"l": 60, "r": 20, "t": 50 if title else 20, "b": 50},
        xaxis_title=timeline.x_label,
        yaxis_title="MiB in use",
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def peaks_figure(summaries: list[Summary]) -> go.Figure:
    """Compare: each variant's memory at its timeline's peak, stacked by what it is."""
    figure = go.Figure()
    have = [s for s in summaries if s.memory and s.memory.get("breakdown")]
    if not have:
        figure.add_annotation(text=NO_GPU_MEMORY, showarrow=False, x=0.5, y=0.5,
                              xref="paper", yref="paper")  # fmt: skip
        figure.update_layout(height=200, xaxis_visible=False, yaxis_visible=False)
        return figure
    names = [s.variant for s in have]
    for category in CATEGORIES:
        values = [
            next((r["MiB at peak"] for r in s.memory["breakdown"] if r["what"] == category), 0.0)
            for s in have
        ]
        if any(values):
            figure.add_trace(go.Bar(x=names, y=values, name=category,
                                    marker_color=COLOURS.get(category)))  # fmt: skip
    figure.update_layout(barmode="stack", height=380, yaxis_title="MiB at the step's peak",
                         legend={"orientation": "h", "y": -0.2}, margin={"t": 20})  # fmt: skip
    return figure


TIMING_COLUMNS = [
    "variant", "timing", "GPU µs/step median", "GPU IQR %", "CPU µs/step median", "CPU IQR %",
    "large spread", "host µs/step eager", "host µs/step graph", "SM MHz min–max", "throttled",
    "timeline peak MiB", "allocator peak MiB",
]  # fmt: skip
# pixels: each header on whole words (12 columns squeezed into the page broke them letter by
# letter); the table scrolls sideways instead
TIMING_WIDTHS = {"variant": 130, "timing": 90, "SM MHz min–max": 300, "throttled": 120}


def timing_widths() -> list[int]:
    return [TIMING_WIDTHS.get(column, 110) for column in TIMING_COLUMNS]


def compare_timing(runs: list[Any]) -> tuple[pd.DataFrame, go.Figure]:
    """Compare's timing table (spread, eager vs graph, clocks, memory peak per variant) and its
    memory peaks side by side; `runs` are compare.VariantRun (those that ran have a summary)."""
    rows, summaries = [], []
    for run in runs:
        summary = run.summary
        if summary is None:
            continue
        summaries.append(summary)
        spread, clocks = summary.step_spread or {}, summary.gpu_clocks or {}
        compared, memory = summary.launch_compare or {}, summary.memory or {}
        gpu, cpu = spread.get("gpu_us") or {}, spread.get("cpu_us") or {}
        rows.append(
            {
                "variant": summary.variant,
                "timing": summary.timing,
                "GPU µs/step median": gpu.get("median"),
                "GPU IQR %": gpu.get("iqr_pct"),
                "CPU µs/step median": cpu.get("median"),
                "CPU IQR %": cpu.get("iqr_pct"),
                "large spread": ", ".join(
                    name for name, value in (("GPU", gpu), ("CPU", cpu)) if value.get("large")
                ),
                "host µs/step eager": (compared.get("eager") or {})
                .get("host_us", {})
                .get("median"),
                "host µs/step graph": (compared.get("cuda-graph") or {})
                .get("host_us", {})
                .get("median"),
                "SM MHz min–max": f"{clocks['sm_mhz_min']}–{clocks['sm_mhz_max']}"
                if clocks.get("available")
                else clocks.get("reason", ""),
                "throttled": ", ".join(clocks.get("throttled") or []),
                "timeline peak MiB": memory.get("peak_mib"),  # the snapshot's timeline
                "allocator peak MiB": memory.get("max_memory_allocated_mib"),  # torch's counter
            }
        )
    table = pd.DataFrame(rows, columns=TIMING_COLUMNS).round(1)
    return table, peaks_figure(summaries)
