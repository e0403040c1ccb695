"""Sweep over sequence lengths on the CPU: refused, unavailable and OOM points are kept."""

from __future__ import annotations

import json
import math
import pickle
import zipfile

import pytest

import profiling.jobs.sweep as sweep_module
import profiling.workload.memory as memory_module
from profiling.jobs.sweep import (
    STEP_PEAK,
    SWEEP_COLUMNS,
    default_seq_lens,
    doubling,
    points_json,
    sweep,
)
from profiling.run.runner import RunError
from profiling.views.compare_figures import (
    MAX_TICKS,
    length_ticks,
    log_ticks,
    sweep_memory_figure,
    sweep_time_figure,
)
from profiling.workload.memory import estimate_bytes, step_estimate_bytes
from profiling.workload.spec import ConfigError, Workload

SHAPE = {"batch": 1, "heads": 2, "head_dim": 32, "dtype": "float32", "device": "cpu"}


@pytest.fixture(scope="module", autouse=True)
def _no_reference_term():
    """These tests are about how a sweep keeps refused points. At their tiny CPU shapes the
    float64 reference check, the same for every variant, would set every estimate (its
    scores and their softmax outweigh naive's fp32 ones); left out here, naive's score
    matrices decide, as they do at the post's shape on a GPU. test_runner pins the term."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(memory_module, "reference_bytes", lambda config: 0)
        yield


def _estimate(variant: str, seq_len: int) -> int:
    return estimate_bytes(Workload.from_user(variant=variant, seq_len=seq_len, **SHAPE))


def _step_estimate(variant: str, seq_len: int) -> int:
    """What a CPU sweep draws (issue 42): one step's estimate, not the whole run's."""
    workload = Workload.from_user(variant=variant, seq_len=seq_len, **SHAPE)
    return step_estimate_bytes(workload, "cpu")


def _budget(monkeypatch, usable: int) -> None:
    """Make check_memory see `usable` bytes (after its 85% headroom) as the free memory."""
    monkeypatch.setattr(memory_module, "available_bytes", lambda device: int(usable / 0.85) + 1)


@pytest.fixture(scope="module")
def refused_sweep(tmp_path_factory):
    # naive holds three S² score matrices, flash none: a budget that fits naive at S=64 refuses
    # it at S=128 while flash still fits there
    usable = _estimate("naive", 64)
    assert _estimate("sdpa-flash", 128) <= usable < _estimate("naive", 128)
    with pytest.MonkeyPatch.context() as mp:
        _budget(mp, usable)
        seen: list[float] = []
        result = sweep(
            ["naive", "sdpa-flash", "sdpa-cudnn"],
            [64, 128],
            out_dir=tmp_path_factory.mktemp("sweep"),
            progress=lambda f, t: seen.append(f),
            **SHAPE,
        )
    return result, seen


def test_refused_point_is_recorded_not_dropped(refused_sweep):
    result, seen = refused_sweep
    t = result.table.set_index(["variant", "seq_len"])
    assert list(result.table.columns) == SWEEP_COLUMNS and len(result.table) == 6
    assert t.loc[("naive", 64), "status"] == "ok" and t.loc[("naive", 64), "CPU µs/fwd"] > 0
    refused = t.loc[("naive", 128)]
    assert refused["status"] == "refused" and "reduce seq_len" in refused["reason"]
    assert refused["est. MiB"] == pytest.approx(_step_estimate("naive", 128) / 1024**2)
    assert (t.loc["sdpa-flash", "status"] == "ok").all()
    assert (t.loc["sdpa-cudnn", "status"] == "unavailable").all()
    assert "needs a CUDA GPU" in t.loc[("sdpa-cudnn", 128), "reason"]
    assert result.time_basis == "CPU" and t["GPU µs/fwd"].isna().all()
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_zip_has_one_trace_per_point_that_ran(refused_sweep):
    result, _ = refused_sweep
    with zipfile.ZipFile(result.zip_path) as zf:
        traces = sorted(n for n in zf.namelist() if n.endswith(".json.gz"))
        rows = json.loads(zf.read("sweep.json"))
    assert traces == [
        "naive/naive_1_2_64_32_float32_causal_cpu_3steps.json.gz",
        "sdpa-flash/sdpa-flash_1_2_128_32_float32_causal_cpu_3steps.json.gz",
        "sdpa-flash/sdpa-flash_1_2_64_32_float32_causal_cpu_3steps.json.gz",
    ]
    assert [r["status"] for r in rows] == list(result.table["status"])
    assert json.loads(json.dumps(points_json(result)))[1]["status"] == "refused"
    pickle.loads(pickle.dumps(result))


def test_figures_mark_points_that_did_not_run(refused_sweep):
    result, _ = refused_sweep
    fig = sweep_time_figure(result)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "CPU" in fig.layout.yaxis.title.text  # CPU run: says which time it plots
    refused = next(t for t in fig.data if t.name == "naive refused")
    assert refused.marker.symbol == "x" and list(refused.text) == ["refused"]
    # in the strip below the data, on the naive row: drawn, not left out
    assert refused.yaxis == "y2" and list(refused.x) == [128] and list(refused.y) == ["naive"]
    assert "reduce seq_len" in refused.customdata[0][0]  # the reason, in the hover
    mem = sweep_memory_figure(result)
    estimate = next(t for t in mem.data if t.name == "naive estimate")
    assert estimate.y[-1] == pytest.approx(_step_estimate("naive", 128) / 1024**2)  # refused too
    assert any(t.name == "sdpa-cudnn unavailable" for t in fig.data)


def test_a_cpu_sweep_charts_the_memory_each_step_allocated_beside_the_estimate(tmp_path):
    """Issue 31: on a CPU the chart drew only the estimate, where a fixed workspace hid naive's
    S² (73.1 vs 73 MiB). The profiler's memory records of one step say what it allocated:
    naive's scores grow with S², flash's with S."""
    result = sweep(["naive", "sdpa-flash"], [256, 512], out_dir=tmp_path, make_zip=False, **SHAPE)
    step = result.table.set_index(["variant", "seq_len"])[STEP_PEAK]
    matrix = 2 * 512 * 512 * 4 / 2**20  # B·H·S² float32 at S = 512: 2 MiB
    assert step["naive", 512] >= 2 * matrix  # the scores and their softmax, at least
    assert step["naive", 512] / step["naive", 256] == pytest.approx(4, rel=0.2)
    assert step["sdpa-flash", 512] < step["naive", 512] / 8
    mem = sweep_memory_figure(result)
    measured = next(t for t in mem.data if t.name == "naive allocated in one step")
    assert list(measured.y) == pytest.approx(list(step["naive"]))
    estimate = next(t for t in mem.data if t.name == "naive estimate")
    assert estimate.line.dash == "dot" and measured.line.dash is None
    assert "estimate only" not in mem.layout.title.text
    from profiling.views.sweep import sweep_columns

    assert STEP_PEAK in sweep_columns("cpu") and STEP_PEAK not in sweep_columns("cuda")
    from profiling.run.runner import run

    workload = Workload.from_user(variant="naive", seq_len=64, **SHAPE)
    assert run(workload, out_dir=tmp_path / "p").step_peak_bytes is None  # a Profile: not asked


@pytest.mark.parametrize("figure", [sweep_time_figure, sweep_memory_figure])
def test_points_that_did_not_run_have_no_value_on_the_data_axis(refused_sweep, figure):
    """Issue 19: refused points were drawn at made-up times (1–2 M µs) that read as data, their
    "refused" labels on top of each other. Now each sits once in the strip below, by variant
    and length, with no text drawn: the status is its symbol and legend, the reason its hover."""
    result, _ = refused_sweep
    fig = figure(result)
    ran_here = result.table["status"] == "ok"
    ok, missed = result.table[ran_here], result.table[~ran_here]
    ran = set(zip(ok["variant"], ok["seq_len"], strict=True))
    for trace in fig.data:
        assert "text" not in trace.mode  # no label drawn on the plot, so none can overlap
        if trace.yaxis == "y" and not trace.name.endswith(" estimate"):
            # a measured line holds only points that ran
            assert {(trace.legendgroup, int(x)) for x in trace.x} <= ran, trace.name
    assert fig.layout.yaxis2.type == "category" and fig.layout.yaxis.type == "log"
    strip = [
        (int(x), y, t.name)
        for t in fig.data
        if t.yaxis == "y2"
        for x, y in zip(t.x, t.y, strict=True)
    ]
    assert len(strip) == len(set((x, y) for x, y, _ in strip))  # one marker per place
    expected = {(int(r.seq_len), r.variant, f"{r.variant} {r.status}") for r in missed.itertuples()}
    assert set(strip) == expected and len(strip) == len(missed)


@pytest.mark.parametrize("figure", [sweep_time_figure, sweep_memory_figure])
def test_every_log_axis_of_the_sweep_charts_has_three_labelled_ticks(refused_sweep, figure):
    """The memory chart had a single y tick; two lengths gave two x ticks."""
    result, _ = refused_sweep  # two lengths, and CPU estimates within a factor of about 2
    fig = figure(result)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.type == "log" and len(axis.tickvals) >= 3
        assert len(axis.ticktext) == len(axis.tickvals)
        low, high = (10**end for end in axis.range)
        assert all(low <= value <= high for value in axis.tickvals)  # every tick on screen


@pytest.mark.parametrize(
    "values",
    [[100, 120], [0.03], [9.01], [9.9, 10.1], [712.5, 713], [20_000, 2e6], [12, 3.4e7],
     [3, 3e8], [1e3, 1e4], [5e5, 5e9]],
)  # fmt: skip
def test_log_ticks_are_round_in_range_and_at_least_three(values):
    ticks = log_ticks(values)
    shown, labels = ticks["tickvals"], ticks["ticktext"]
    low, high = (10**end for end in ticks["range"])
    assert 3 <= len(shown) <= MAX_TICKS and shown == sorted(shown)
    assert low <= min(values) and max(values) <= high  # the data on screen, and every tick
    assert all(low <= value <= high for value in shown)
    assert len(set(labels)) == len(labels)  # 2k and 20k never both read "2"
    for value, text in zip(shown, labels, strict=True):
        scale = {"k": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1)
        assert float(text.rstrip("kMG")) * scale == pytest.approx(value)
        assert len(f"{value / 10 ** math.floor(math.log10(value)):g}") <= 3  # round: 1.5, 2, 7


def test_log_ticks_of_nothing_and_length_ticks():
    assert log_ticks([]) == {} and log_ticks([0, -1, float("nan")]) == {}
    assert length_ticks([256, 512, 1024, 4096])["tickvals"] == [256, 512, 1024, 4096]
    assert length_ticks([4096, 256])["tickvals"] == [128, 256, 4096]
    one = length_ticks([512])
    assert one["tickvals"] == [256, 512, 1024] and one["ticktext"] == ["256", "512", "1024"]
    assert one["range"][0] < math.log10(256) and math.log10(1024) < one["range"][1]


def test_default_lengths_double_and_stop_where_nothing_fits(monkeypatch):
    assert doubling() == [256, 512, 1024, 2048, 4096, 8192, 16384]
    assert doubling(64, 300) == [64, 128, 256]
    _budget(monkeypatch, _estimate("naive", 256))
    assert default_seq_lens(["naive"], start=64, stop=4096, **SHAPE) == [64, 128, 256]
    # flash fits much longer: lengths stay while any variant fits (naive's are refused then)
    both = default_seq_lens(["naive", "sdpa-flash"], start=64, stop=4096, **SHAPE)
    assert both[:3] == [64, 128, 256] and len(both) > 3


def test_oom_ends_a_variant_and_later_points_say_why(monkeypatch, tmp_path):
    real_run = sweep_module.run

    def fake_run(config, out_dir=None, progress=None, step_memory=False):
        if config.variant == "naive" and config.seq_len >= 128:
            raise RunError("out of memory on cpu for naive: memory was released")
        return real_run(config, out_dir=out_dir, progress=progress, step_memory=step_memory)

    monkeypatch.setattr(sweep_module, "run", fake_run)
    result = sweep(["naive"], [64, 128, 256], out_dir=tmp_path, make_zip=False, **SHAPE)
    assert list(result.table["status"]) == ["ok", "oom", "skipped"]
    assert result.table["reason"].iloc[2] == "not run: oom at S=128"
    assert result.zip_path is None


def test_bad_requests_are_config_errors():
    with pytest.raises(ConfigError, match="unknown variant"):
        sweep(["nope"], [64], **SHAPE)
    with pytest.raises(ConfigError, match="seq_len must be between"):
        sweep(["naive"], [8], **SHAPE)
    with pytest.raises(ConfigError, match="no variant"):
        sweep([], [64], **SHAPE)


def test_a_broken_variant_fails_each_point_and_is_not_unavailable(monkeypatch, tmp_path):
    """A warm-up that raises is a failed point with the error's class; unlike an unavailable
    variant, the next length is still tried."""
    from tests.run.test_runner import install_variant

    calls = []

    def illegal_access(q, k, v):
        calls.append(q.shape[2])
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    install_variant(monkeypatch, "broken-forward", forward=illegal_access)
    result = sweep(["broken-forward"], [64, 128], out_dir=tmp_path, make_zip=False, **SHAPE)
    assert list(result.table["status"]) == ["failed", "failed"]
    assert sorted(set(calls)) == [64, 128]
    assert result.table["reason"].iloc[1] == (
        "broken-forward failed on cpu: RuntimeError: CUDA error: an illegal memory access was "
        "encountered"
    )


def test_a_cpu_sweeps_estimate_is_each_variants_own_and_each_line_shows(tmp_path):
    """Issue 42, point 5: on a CPU the estimate drew 73/90/152 MiB for naive and flash alike
    (the whole run's, whose float64 check and GPU workspace every variant shares) against
    2.2/8.5/33 and 0.4/0.8/2.1 MiB measured, and one line hid the other. Now each variant's
    estimate is its own step's on this device, within a factor of 3 of what the step
    allocated, and naive-inplace's line (the same model as naive's) leaves naive's showing."""
    shape = {**SHAPE, "heads": 4, "head_dim": 64}  # the page's CPU defaults
    variants = ["naive", "naive-inplace", "sdpa-flash"]
    result = sweep(variants, [256, 512, 1024], out_dir=tmp_path, make_zip=False, **shape)
    table = result.table.set_index(["variant", "seq_len"])
    assert (table["status"] == "ok").all()
    ratio = table["est. MiB"] / table[STEP_PEAK]
    assert ((ratio > 1 / 3) & (ratio < 3)).all(), ratio
    assert (table.loc["naive", "est. MiB"] > 8 * table.loc["sdpa-flash", "est. MiB"]).all()
    lines = [t for t in sweep_memory_figure(result).data if t.name.endswith(" estimate")]
    assert [t.name for t in lines] == [f"{v} estimate" for v in variants]
    for line in lines:
        assert line.visible in (None, True) and len(line.y) == 3 and min(line.y) > 0
    looks = [(line.line.dash, line.line.width) for line in lines]
    assert len(set(looks)) == len(looks)  # no two alike: one on top of another still shows
    assert looks[0][1] > looks[1][1]  # the earlier line is the wider: its edges show
