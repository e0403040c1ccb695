"""The Gantt builder: one bar per span, rows = lane × depth, colours by category, safe hover."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import numpy as np
import plotly.io as pio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiling.gantt.bars import category_arrays, legend_group
from profiling.gantt.rows import span_rows
from profiling.gantt.spec import LINKS_NAME, X_TITLE, bar_count, build_gantt, gantt_spec
from profiling.run import gantt_records
from profiling.run import records as small_trace
from profiling.trace import model as trace
from tests.conftest import FIXTURES, from_document

# the runs' own traces (a user's trace, recorded without the app's spans, has its own tests)
FIXTURE_FILES = sorted(p for p in FIXTURES.glob("*.json.gz") if "_user-" not in p.name)


def _event(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def math_like_document(steps: int = 3, kernels: int = 22, streams: tuple[int, ...] = (7,)):
    """A math-backend-shaped trace: per step one attn_fwd with `kernels` launches, each a
    cpu_op → cudaLaunchKernel pair and a kernel on a GPU stream, linked by correlation id."""
    names = ["volta_sgemm_128x64_nn", "void at::native::triu_tril_kernel<float>",
             "void at::native::reduce_kernel<512, 1>", "void at::native::where_kernel<float>",
             "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>",
             "Memcpy DtoD (Device -> Device)", "Memset (Device)"]  # fmt: skip
    events, t, corr = [], 0.0, 0
    for step in range(steps):
        step_start = t
        t += 2
        fwd_start = t
        for k in range(kernels):
            corr += 1
            events.append(_event("cpu_op", f"aten::op{k % 5}", t, 10))
            events.append(_event("cuda_runtime", "cudaLaunchKernel", t + 2, 5, correlation=corr))
            name = names[k % len(names)]
            cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
            cat = "gpu_memset" if name.startswith("Memset") else cat
            events.append(
                _event(cat, name, t + 20, 8, pid=0, tid=streams[k % len(streams)],
                       correlation=corr, grid=[64, 1, 1], block=[128, 1, 1],
                       **{"registers per thread": 32, "shared memory": 0,
                          "est. achieved occupancy %": 50})
            )  # fmt: skip
            t += 12
        events.append(_event("user_annotation", "attn_fwd", fwd_start, t - fwd_start))
        events.append(_event("user_annotation", f"ProfilerStep#{step + 2}", step_start,
                             t - step_start + 1))  # fmt: skip
        t += 5
    return {"traceEvents": events}


@pytest.fixture(scope="module", params=FIXTURE_FILES, ids=lambda p: p.name.split("_8_")[0])
def fixture_trace(request) -> trace.Trace:
    return trace.load(request.param)


def bar_traces(fig):
    return [t for t in fig.data if t.type == "bar"]


def test_one_bar_per_span_in_the_h200_fixtures(fixture_trace):
    fig = build_gantt(fixture_trace.spans, fixture_trace.lanes)
    assert bar_count(fig) == len(fixture_trace.spans)


def test_kernels_are_coloured_by_their_role_on_both_readers():
    """Issue 22: a run's Gantt colours each kernel by its role in attention (one legend entry
    per role), from the model and from a run's records alike."""
    path = FIXTURES / "h200_train-naive_8_16_1024_64_bf16.json.gz"
    model = trace.load(path)
    spec = gantt_spec(model.spans, model.lanes)
    groups = {t["name"]: len(t["x"]) for t in spec.data if t.get("type") == "bar"}
    assert {"role · QKᵀ", "role · PV", "role · softmax", "role · mask", "role · dQ/dK/dV"} <= set(
        groups
    )
    # only kernels whose launch the trace did not record (before its first step) keep their
    # category's colour: no launching operator, no role
    unlinked = model.spans[(model.spans["category"] == "kernel") & (model.spans["link"] < 0)]
    assert sum(n for name, n in groups.items() if name.startswith("kernel · ")) == len(unlinked)
    assert len(unlinked) < 5
    assert groups["role · dQ/dK/dV"] == 12
    records = small_trace.read(path)
    assert gantt_records.gantt(records).to_json() == spec.to_json()


def test_bars_per_category_match_the_trace_model(fixture_trace):
    spans = fixture_trace.spans
    fig = build_gantt(spans, fixture_trace.lanes)
    drawn: dict[str, int] = {}
    for t in bar_traces(fig):
        category = t.name.split(" · ")[0]  # "kernel · gemm" → "kernel"
        category = "kernel" if category == "role" else category  # "role · softmax": a kernel
        drawn[category] = drawn.get(category, 0) + len(t.x)
    expected = spans["category"].astype(str).value_counts().to_dict()
    assert drawn == expected
    # one legend entry per group, each with its own colour
    colours = [t.marker.color for t in bar_traces(fig)]
    assert len(set(colours)) == len(colours)
    assert all(t.showlegend is not False for t in bar_traces(fig))


def test_rows_are_lanes_stacked_by_depth(fixture_trace):
    spans, lanes = fixture_trace.spans, fixture_trace.lanes
    fig = build_gantt(spans, lanes)
    rows = list(fig.layout.yaxis.categoryarray)
    cpu_lane = next(lane for lane in lanes if lane.startswith("CPU"))
    deepest = int(spans.loc[spans["lane"] == cpu_lane, "depth"].max())
    stacked = [f"{cpu_lane} · d{d}" for d in range(deepest + 1)] if deepest else [cpu_lane]
    assert [r for r in rows if r.startswith(cpu_lane)] == stacked
    gpu_lanes = [lane for lane in lanes if lane.startswith("GPU")]
    assert all(lane in rows for lane in gpu_lanes)  # flat lanes keep one row
    assert rows.index(stacked[0]) < rows.index(gpu_lanes[0])  # CPU on top
    assert fig.layout.yaxis.autorange == "reversed"
    used = {y for t in bar_traces(fig) for y in t.y}
    assert used == set(rows)
    # every bar sits on its own span's lane and depth
    labels, _ = span_rows(spans, lanes)
    for lane, depth, label in zip(spans["lane"], spans["depth"], labels, strict=True):
        assert label.startswith(str(lane)) and (label == lane or label.endswith(f"d{depth}"))
    assert fig.layout.height >= 150 + 26 * len(rows)


def test_time_axis_boundaries_and_links(fixture_trace):
    spans = fixture_trace.spans
    fig = build_gantt(spans, fixture_trace.lanes)
    assert fig.layout.xaxis.title.text == X_TITLE == "µs from first profiled step"
    n_steps = len(fixture_trace.steps())
    phases = spans[spans["name"].isin(["attn_fwd", "attn_bwd"]) & (spans["kind"] == "cpu")]
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    train = "attn_bwd" in set(phases["name"])  # a train step: each phase shaded and named
    assert len(rects) == len(phases) == (2 if train else 1) * n_steps  # one per measured step
    assert n_steps in (3, 10)  # the runs' 3 steps; issue 23's timing fixtures measure 10
    assert len({s.fillcolor for s in rects}) == (2 if train else 1)
    assert len(lines) == n_steps + 1  # each step's start, and the last step's end
    assert min(s.x0 for s in lines) == pytest.approx(0.0)
    labels = [a.text for a in fig.layout.annotations]
    first = int(fixture_trace.steps()["name"].iloc[0].removeprefix("ProfilerStep#"))
    expected = [f"step {first + i}" for i in range(n_steps)]
    assert [t for t in labels if t.startswith("step")] == expected
    assert sorted(t for t in labels if t.startswith("attn")) == sorted(
        phases["name"] if train else []
    )
    link = next(t for t in fig.data if t.name == LINKS_NAME)
    assert link.visible == "legendonly"
    linked = int(((spans["kind"] == "gpu") & (spans["link"] >= 0)).sum())
    assert linked > 0 and len(link.x) == 3 * linked


def test_single_fused_kernel_stays_readable():
    t = trace.load(FIXTURES / "sdpa_flash_8_16_1024_64_bf16.json.gz")
    fig = build_gantt(t.spans, t.lanes)
    kernels = [tr for tr in bar_traces(fig) if tr.name.startswith(("kernel", "role"))]
    assert [tr.name for tr in kernels] == ["role · fused attention forward"]
    assert len(kernels[0].x) == 3  # one per forward
    assert all("flash_fwd_kernel" in text for text in kernels[0].text)
    hover = kernels[0].hovertext[0]
    for field in ("duration", "grid", "block", "registers/thread", "shared memory", "occupancy"):
        assert field in hover


def test_many_kernels_per_forward():
    t = from_document(math_like_document(steps=3, kernels=22, streams=(7, 20)))
    fig = build_gantt(t.spans, t.lanes)
    assert bar_count(fig) == len(t.spans)
    names = {tr.name for tr in bar_traces(fig)}
    assert {"kernel · gemm", "kernel · softmax", "kernel · reduction", "memcpy", "memset"} <= names
    gpu_rows = [r for r in fig.layout.yaxis.categoryarray if r.startswith("GPU")]
    assert len(gpu_rows) == 2  # two streams, one row each
    link = next(tr for tr in fig.data if tr.name == LINKS_NAME)
    assert len(link.x) == 3 * 3 * 22
    json.loads(fig.to_json())  # serialisable for gr.Plot


def test_names_are_escaped_in_hover_and_labels():
    evil = '<img src=x onerror="alert(1)">&<b>'
    doc = {"traceEvents": [
        _event("user_annotation", "ProfilerStep#1", 0, 100),
        _event("cpu_op", evil, 1, 50),
        _event("cuda_runtime", "cudaLaunchKernel", 2, 5, correlation=1),
        _event("kernel", f"void k<{evil}>", 10, 20, pid=0, tid=7, correlation=1,
               grid=["<script>"], block=[1, 1, 1]),
    ]}  # fmt: skip
    t = from_document(doc)
    fig = build_gantt(t.spans, t.lanes, title=evil)
    texts = [s for tr in bar_traces(fig) for s in list(tr.hovertext) + list(tr.text)]
    texts += [fig.layout.title.text, *fig.layout.yaxis.categoryarray]
    joined = "\n".join(texts)
    markup_removed = joined.replace("<b>", "").replace("</b>", "").replace("<br>", "")
    assert "<" not in markup_removed and ">" not in markup_removed  # only our own tags remain
    assert "&lt;img" in joined and "&amp;" in joined and "&lt;script&gt;" in joined
    assert bar_count(fig) == len(t.spans) == 4


def test_empty_spans_give_an_empty_figure():
    t = trace.load(FIXTURE_FILES[0])
    fig = build_gantt(t.spans.iloc[0:0], [])
    assert bar_count(fig) == 0 and fig.layout.annotations


def test_category_arrays_are_plain_arrays_for_a_later_level_of_detail():
    t = trace.load(FIXTURES / "naive_8_16_1024_64_bf16.json.gz")
    rows, _ = span_rows(t.spans, t.lanes)
    arrays = category_arrays(t.spans, rows)
    assert sum(len(a.base) for a in arrays.values()) == len(t.spans)
    all_index = np.sort(np.concatenate([a.index for a in arrays.values()]))
    assert (all_index == np.arange(len(t.spans))).all()
    for a in arrays.values():
        assert len(a.base) == len(a.dur) == len(a.row) == len(a.hover) == len(a.text)
        assert (a.dur >= 0).all()
    assert set(arrays) == set(legend_group(t.spans))


def _plain(value):
    """Plotly's JSON with its base64 typed arrays (`bdata`) decoded to lists, to compare."""
    if isinstance(value, dict):
        if {"dtype", "bdata"} <= set(value):
            flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            return flat.tolist()
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("window", [None, (100.0, 3000.0)])
def test_spec_json_is_what_plotly_would_send(fixture_trace, window):
    """gr.Plot sends FigureSpec.to_json(); it must equal plotly's own JSON of the same figure
    (template included), value for value."""
    spec = gantt_spec(fixture_trace.spans, fixture_trace.lanes, title="<b>x</b>", window=window)
    sent = spec.to_json()
    ours = json.loads(sent)
    assert ours == _plain(json.loads(spec.figure().to_json()))
    assert spec.to_json() == sent  # building the plotly Figure left the spec as it was
    assert ours["layout"]["template"]["layout"]  # plotly's default look, not a bare chart


def test_spec_json_with_level_of_detail_equals_plotly(big_trace):
    spec = gantt_spec(big_trace.spans, big_trace.lanes)
    assert json.loads(spec.to_json()) == _plain(json.loads(spec.figure().to_json()))


def test_plot_json_round_trips():
    t = trace.load(FIXTURES / "sdpa_cudnn_8_16_1024_64_bf16.json.gz")
    fig = pio.from_json(build_gantt(t.spans, t.lanes).to_json())
    assert bar_count(fig) == len(t.spans)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1000), st.integers(0, 300), st.sampled_from(["cpu_op", "kernel"])),
        min_size=1,
        max_size=40,
    )
)
def test_any_trace_draws_one_bar_per_span(spans):
    events = [
        _event(cat, f"op{i}", ts, dur, pid=0 if cat == "kernel" else 1)
        for i, (ts, dur, cat) in enumerate(spans)
    ]
    t = from_document({"traceEvents": events})
    fig = build_gantt(t.spans, t.lanes)
    assert bar_count(fig) == len(t.spans)
    rows = set(fig.layout.yaxis.categoryarray)
    assert {y for tr in bar_traces(fig) for y in tr.y} <= rows


def test_math_backend_h200_trace_stays_readable():
    path = FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
    if not path.exists():
        pytest.skip("the H200 sdpa-math fixture is not in this checkout")
    t = trace.load(path)
    fig = build_gantt(t.spans, t.lanes)
    kernels = [tr for tr in bar_traces(fig) if tr.name.startswith(("kernel", "role"))]
    assert sum(len(tr.y) for tr in kernels) >= 3 * 20  # 20 kernels per forward, 3 forwards
    assert {"role · QKᵀ", "role · softmax", "role · mask", "role · cast/upcast"} <= {
        tr.name for tr in kernels
    }
    rows = list(fig.layout.yaxis.categoryarray)
    assert fig.layout.height >= 150 + 26 * len(rows) and len(rows) <= 12  # stays compact


# -- level of detail (issue #7) ------------------------------------------------------------
def _synthetic(n_events: int):
    from benchmarks import gen_trace

    return from_document(gen_trace.generate(n_events, seed=3))


@pytest.fixture(scope="module")
def big_trace():
    return _synthetic(60_000)


def test_big_trace_is_aggregated_never_dropped(big_trace):
    from profiling.gantt.detail import AGGREGATED, DETAIL_LIMIT
    from profiling.gantt.spec import spans_drawn

    spans = big_trace.spans
    assert len(spans) > DETAIL_LIMIT
    fig = build_gantt(spans, big_trace.lanes)
    assert spans_drawn(fig) == len(spans)  # every span is a bar or counted in a density bar
    aggregated = [t for t in fig.data if t.type == "bar" and t.legendgroup == AGGREGATED]
    assert len(aggregated) == 1 and aggregated[0].name.startswith(AGGREGATED)
    assert "aggregated" in aggregated[0].hovertext[0]
    assert bar_count(fig) < DETAIL_LIMIT + 1_500 * 8
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert "Level of detail" in notes and f"{len(spans):,} spans in view" in notes
    assert len(fig.to_json()) < 5 * 1024**2


def test_a_narrow_window_shows_every_span_in_it(big_trace):
    from profiling.gantt.spec import spans_drawn

    spans = big_trace.spans
    lo, hi = 0.0, float(spans["end_us"].max()) / 50
    fig = build_gantt(spans, big_trace.lanes, window=(lo, hi))
    visible = int(((spans["end_us"] >= lo) & (spans["start_us"] <= hi)).sum())
    assert bar_count(fig) == spans_drawn(fig) == visible  # full detail: one bar per span
    assert tuple(fig.layout.xaxis.range) == (lo, hi)
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert f"{len(spans) - visible:,} spans outside it are not drawn" in notes


def test_small_traces_keep_one_bar_per_span_and_no_note():
    t = trace.load(FIXTURES / "sdpa_cudnn_8_16_1024_64_bf16.json.gz")
    fig = build_gantt(t.spans, t.lanes)
    assert bar_count(fig) == len(t.spans)
    assert not any("Level of detail" in (a.text or "") for a in fig.layout.annotations)


def test_thousands_of_lanes_keep_the_busiest_rows_and_say_so():
    """An upload with a thread per event (or deep recursion) must not draw 10⁴ rows: the
    busiest MAX_ROWS are drawn, the rest are counted under the chart, never dropped silently."""
    from profiling.gantt.rows import MAX_ROWS
    from profiling.gantt.spec import spans_drawn

    threads = [_event("cpu_op", f"op{i}", i, 1 + (i % 7), tid=100 + i) for i in range(5_000)]
    main = [_event("cpu_op", "outer", 0, 9_000), _event("cpu_op", "inner", 10, 8_000)]
    stream = [_event("kernel", "gemm", 50, 4_000, pid=0, tid=7)]
    t = from_document({"traceEvents": threads + main + stream})
    fig = build_gantt(t.spans, t.lanes)
    rows = list(fig.layout.yaxis.categoryarray)
    assert len(rows) == MAX_ROWS
    assert "CPU · thread 1 · d0" in rows and "CPU · thread 1 · d1" in rows  # the main thread
    assert any(r.startswith("GPU 0 · stream 7") for r in rows)
    lanes_order = [r for r in rows if r.startswith("CPU · thread 1 ") or r.startswith("GPU")]
    assert rows.index(lanes_order[0]) < rows.index(lanes_order[-1])  # display order kept
    drawn = spans_drawn(fig)
    note = " ".join(a.text for a in fig.layout.annotations)
    hidden = len(t.spans) - drawn
    assert hidden == 5_003 - MAX_ROWS
    assert (
        f"the trace has {5_003:,} rows (lanes × nesting depth); the {MAX_ROWS:,} busiest are "
        f"drawn, and {hidden:,} spans on the other {5_003 - MAX_ROWS:,} are not" in note
    )
    assert fig.layout.height <= 150 + 26 * MAX_ROWS


def test_a_window_late_in_a_long_trace_gets_its_own_step_lines(big_trace):
    """Step lines and attn_fwd shading are picked among the steps in view, not the trace's
    first MAX_MARKERS (a window past the 60th step was drawn bare)."""
    from profiling.gantt.spec import MAX_MARKERS

    spans = big_trace.spans
    steps = big_trace.steps().sort_values("start_us")
    assert len(steps) > MAX_MARKERS + 5
    late = steps.iloc[MAX_MARKERS + 2]
    window = (float(late["start_us"]), float(late["end_us"]))
    layout = gantt_spec(spans, big_trace.lanes, window=window).layout
    xs = [s["x0"] for s in layout["shapes"]]
    assert any(window[0] <= x <= window[1] for x in xs)
    assert f"step {late['name'].split('#')[1]}" in [a["text"] for a in layout["annotations"]]


# The run path makes its Gantt spec without plotly (issue 18): plotly is loaded only when the
# spec is serialised or made a Figure. A child process, since this one has plotly loaded.
NO_PLOTLY_CHILD = """
import sys
import profiling.run.runner, profiling.run.records, profiling.run.gantt_records
from tests.conftest import FIXTURES
spec = profiling.run.gantt_records.gantt(profiling.run.records.read(FIXTURES / "{name}"))
assert spec is not None and spec.data, "the fixture's spec has bars"
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "plotly")
assert not loaded, f"plotly loaded before serialising: {{loaded[:5]}}"
spec.to_json()
assert "plotly.io" in sys.modules, "serialising reads plotly's default template"
"""


def test_a_runs_gantt_spec_is_made_without_plotly():
    name = "h200_sdpa-math_8_16_1024_64_bf16.json.gz"
    done = subprocess.run(
        [sys.executable, "-c", NO_PLOTLY_CHILD.format(name=name)], capture_output=True,
        text=True, timeout=120, cwd=FIXTURES.parents[1],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
