"""A model Sweep's request and points (issue 43, profiling/jobs/model_sweep.py): the lengths
an API call sends read loosely and each checked, every point validated before the first run,
a length the CPU budget refuses kept as a point (with what the run store needs of it). Real
tiny transformers runs on the CPU."""

from __future__ import annotations

import pytest

from profiling.jobs.model_sweep import MAX_POINTS, sweep_points, sweep_request
from profiling.store.hooks import model_sweep_runs
from profiling.user_values import ConfigError
from tests.conftest import ascii_id

FIELDS = dict(preset="tiny", layers=1, dtype="float32", batch=64, mode="prefill",
              new_tokens=1, implementations="eager,sdpa", device="cpu")  # fmt: skip


@pytest.mark.parametrize("lengths", ["32, 16", [16, 32], [32.0, 16], ("16", "32")])
def test_lengths_are_read_loosely_and_run_in_order(lengths):
    workloads = sweep_request(lengths, **FIELDS)
    assert [w.seq_len for w in workloads] == [16, 32]
    assert {w.implementations for w in workloads} == {("eager", "sdpa")}


@pytest.mark.parametrize(
    ("lengths", "said"),
    [
        ("³", "seq_lens must be whole numbers separated by commas"),  # int("³") raised
        ("16;32", "seq_lens must be whole numbers separated by commas"),
        ([[16]], "each of seq_lens must be a whole number"),
        ([16, True], "each of seq_lens must be a whole number"),
        ([16, 0], "each of seq_lens must be between 1 and 32768"),
        ([16, 4096], "tiny takes at most 2048 positions"),
        ("", "seq_lens: give 1 to 8 sequence lengths"),
        (None, "seq_lens: give 1 to 8 sequence lengths"),
        (list(range(16, 16 + MAX_POINTS + 1)), "seq_lens must be up to 8 whole numbers"),
        ([16, 16], "a model sweep takes each sequence length once"),
        ({"16": 1}, "seq_lens must be up to 8 whole numbers"),
    ],
    ids=ascii_id,  # a test id must read the same in a second pytest run in one process (mutmut)
)  # fmt: skip
def test_a_bad_length_refuses_the_whole_sweep_in_one_line(lengths, said):
    with pytest.raises(ConfigError) as refused:
        sweep_request(lengths, **FIELDS)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_model_field_is_checked_as_a_model_run_checks_it():
    with pytest.raises(ConfigError, match="preset must be one of"):
        sweep_request([16], **{**FIELDS, "preset": "../etc"})
    with pytest.raises(ConfigError, match="a model sweep runs full batches"):
        sweep_request([16], **{**FIELDS, "batch": 2, "lengths": "16,8"})


def test_a_length_the_cpu_refuses_is_a_point_kept_once_per_implementation(tmp_path):
    """64 × 1024 tokens through two layers pass the CPU's budget of FLOPs a step; 64 × 16 run."""
    points = sweep_points(sweep_request([1024, 16], **{**FIELDS, "layers": 2}), tmp_path)
    assert [(p.seq_len, p.result is not None) for p in points] == [(16, True), (1024, False)]
    ran, refused = points
    assert [item.id for item in ran.result.runs if item.ok] == ["eager", "sdpa"]
    assert "GFLOP a step; on a CPU this app runs at most 20" in refused.refused
    assert refused.workload["text"] == "tiny ×2 layers B64 S1024 float32 prefill"
    assert refused.workload["device"] == "cpu" and ran.workload["seq_len"] == 16
    kept = model_sweep_runs(points, "test")
    assert [(run.kind, run.config["variant"], run.status) for run in kept] == [
        ("model-sweep", "eager", "ok"), ("model-sweep", "sdpa", "ok"),
        ("model-sweep", "eager", "refused"), ("model-sweep", "sdpa", "refused"),
    ]  # fmt: skip
    assert kept[-1].reason == refused.refused and kept[-1].label == refused.workload["text"]
    assert {run.origin for run in kept} == {"test"}  # a refused length's runs keep it too
    assert kept[-1].config["seq_len"] == 1024 and kept[-1].config["device"] == "cpu"
