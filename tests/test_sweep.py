"""Sweep over sequence lengths on the CPU: refused, unavailable and OOM points are kept."""

from __future__ import annotations

import json
import pickle
import zipfile

import pytest

import profiling.memory_estimate as memory_module
import profiling.sweep as sweep_module
from profiling.compare_figures import sweep_memory_figure, sweep_time_figure
from profiling.memory_estimate import estimate_bytes
from profiling.runner import RunError
from profiling.sweep import SWEEP_COLUMNS, default_seq_lens, doubling, points_json, sweep
from profiling.workload import ConfigError, Workload

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
    assert refused["est. MiB"] == pytest.approx(_estimate("naive", 128) / 1024**2)
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
    ran = [y for t in fig.data if t.mode == "lines+markers" for y in t.y]
    assert refused.y[0] > max(ran)  # drawn above every measured point, not left out
    mem = sweep_memory_figure(result)
    at_estimate = next(t for t in mem.data if t.name == "naive refused")
    assert at_estimate.y[0] == pytest.approx(_estimate("naive", 128) / 1024**2)
    assert "estimate only" in mem.layout.title.text
    assert any(t.name == "sdpa-cudnn unavailable" for t in fig.data)


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

    def fake_run(config, out_dir=None, progress=None):
        if config.variant == "naive" and config.seq_len >= 128:
            raise RunError("out of memory on cpu for naive: memory was released")
        return real_run(config, out_dir=out_dir, progress=progress)

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
    from tests.test_runner import install_variant

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
