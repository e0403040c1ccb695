"""Validation refuses bad workloads before anything is allocated, with messages that help."""

from __future__ import annotations

import math

import pytest
import torch

from attention import VARIANTS, Problem
from profiling.workload import request as job_request
from profiling.workload import spec as workload
from profiling.workload.memory import check_memory, estimate_bytes, largest_fitting_seq_len
from profiling.workload.spec import (
    ConfigError,
    Workload,
    known_variants,
    page_ranges,
    page_workload,
    shape_from_user,
)


def test_defaults_are_the_posts_shape():
    c = Workload.from_user()
    assert (c.batch, c.heads, c.seq_len, c.head_dim, c.dtype, c.causal) == (
        8,
        16,
        1024,
        64,
        "bfloat16",
        True,
    )
    assert c.shape_tag("cuda") == "8_16_1024_64_bfloat16_causal_cuda_3steps"
    assert c.tag("cuda") == f"{c.variant}_8_16_1024_64_bfloat16_causal_cuda_3steps"


def test_problem_is_what_a_variant_is_built_for():
    c = Workload.from_user(batch=2, heads=3, seq_len=64, head_dim=16, dtype="float16",
                            causal=False)  # fmt: skip
    assert c.problem("cpu") == Problem(2, 3, 64, 16, False, torch.float16, "cpu")


def test_integral_floats_from_sliders_are_accepted():
    assert Workload.from_user(seq_len=512.0).seq_len == 512


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"variant": "nope"}, "unknown variant 'nope'"),
        ({"dtype": "float64"}, "unknown dtype"),
        ({"device": "tpu"}, "unknown device"),
        ({"seq_len": 0}, "seq_len must be between 16 and 131072"),
        ({"seq_len": -5}, "between"),
        ({"seq_len": 2**63}, "between"),
        ({"seq_len": 100.5}, "whole number"),
        ({"seq_len": math.nan}, "whole number"),
        ({"seq_len": math.inf}, "whole number"),
        ({"seq_len": "1024"}, "whole number"),
        ({"seq_len": True}, "whole number"),
        ({"seq_len": None}, "missing"),
        ({"batch": 65}, "batch must be between 1 and 64"),
        ({"head_dim": 60}, "multiple of 8"),
        ({"steps": 0}, "steps must be between"),
        ({"causal": "maybe"}, "causal must be true or false"),
        ({"variant": 3}, "variant must be text"),
        ({"bogus": 1}, "unknown parameter"),
        ({"batch": 64, "heads": 128, "seq_len": 131072, "head_dim": 256}, "2³¹"),
    ],
)
def test_bad_input_is_refused_clearly(raw, message):
    with pytest.raises(ConfigError, match=message):
        Workload.from_user(**raw)


def test_estimate_grows_with_the_score_matrices():
    # at S=2048 the profiled steps, not the float64 reference check, set both naive peaks
    naive = Workload.from_user(variant="naive", seq_len=2048)
    inplace = Workload.from_user(variant="naive-inplace", seq_len=2048)
    math_ = Workload.from_user(variant="sdpa-math", seq_len=2048)
    scores = 8 * 16 * 2048 * 2048 * 2  # one bf16 score matrix
    assert estimate_bytes(naive) - estimate_bytes(inplace) == scores
    assert estimate_bytes(math_) > estimate_bytes(naive)  # FP32 scores


def test_memory_refusal_names_the_need_and_the_fix(monkeypatch):
    monkeypatch.setattr("profiling.workload.memory.available_bytes", lambda device: 8 * 1024**3)
    big = Workload.from_user(variant="naive", seq_len=65536)
    with pytest.raises(ConfigError) as info:
        check_memory(big, "cuda")
    text = str(info.value)
    assert "needs about" in text and "GiB" in text and "reduce seq_len to" in text
    fit = largest_fitting_seq_len(big, int(0.85 * 8 * 1024**3))
    assert fit and estimate_bytes(big.with_(seq_len=fit)) <= 0.85 * 8 * 1024**3
    spare = check_memory(big.with_(seq_len=fit), "cuda")  # the suggestion really fits
    assert spare == int(0.85 * 8 * 1024**3) - estimate_bytes(big.with_(seq_len=fit)) >= 0


def test_a_new_field_is_read_and_checked_by_its_rule_alone(monkeypatch):
    """Room for the next issues' fields: a dataclass field and its rule, nothing else."""
    from dataclasses import dataclass

    from profiling.workload import spec as workload

    @dataclass(frozen=True)
    class WithMore(Workload):
        mode: str = "forward"
        window: int | None = None  # None: no sliding window

    monkeypatch.setitem(workload.CHOICES, "mode", ("forward", "backward", "train"))
    monkeypatch.setitem(workload.LIMITS, "window", (1, 131072))
    made = WithMore.from_user(mode=" train ", window=256.0)
    assert (made.mode, made.window, made.seq_len) == ("train", 256, 1024)
    assert WithMore.from_user().window is None and WithMore.from_user(window=None).window is None
    with pytest.raises(ConfigError, match="unknown mode 'sideways'; choose one of: forward, back"):
        WithMore.from_user(mode="sideways")
    with pytest.raises(ConfigError, match="window must be between 1 and 131072, got 0"):
        WithMore.from_user(window=0)
    with pytest.raises(ConfigError, match="mode is missing"):
        WithMore.from_user(mode=None)
    with pytest.raises(ConfigError, match="window must be between"):
        WithMore(window=-1).validated()


def test_a_shape_is_checked_as_a_shape_without_a_variant():
    shape = shape_from_user(seq_len=512.0, dtype="float32")
    assert "variant" not in shape and shape["seq_len"] == 512 and shape["steps"] == 3
    assert Workload(variant="sdpa-math", **shape).validated().dtype == "float32"
    with pytest.raises(ConfigError, match="unknown shape parameter"):
        shape_from_user(variant="naive")
    with pytest.raises(ConfigError, match="head_dim must be a multiple of 8"):
        shape_from_user(head_dim=60)


def test_variant_ids_are_known_or_refused_in_one_place(monkeypatch):
    assert known_variants(["naive", "sdpa-math", "naive"]) == ["naive", "sdpa-math"]
    with pytest.raises(ConfigError, match=r"unknown variant\(s\): 'nope'; choose from: naive,"):
        known_variants(["naive", "nope"])
    with pytest.raises(ConfigError, match="no variant; choose from"):
        known_variants([])
    monkeypatch.setitem(VARIANTS, "toy", VARIANTS["naive"])  # registered later: known at once
    assert known_variants(["toy"]) == ["toy"] and Workload.from_user(variant="toy").variant


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_page_workload_is_held_to_the_pages_ranges_and_budget(device):
    low, high, _ = page_ranges(device)["seq_len"]
    assert page_workload(device, seq_len=low, batch=1, heads=1).seq_len == low
    with pytest.raises(ConfigError, match=f"seq_len must be between {low} and {high} on this"):
        page_workload(device, seq_len=high * 2)
    big = dict(seq_len=4096, batch=8, heads=16, head_dim=128)
    if device == "cpu":
        with pytest.raises(ConfigError, match="GFLOP per forward; on a CPU"):
            page_workload(device, **big)
    else:
        assert page_workload(device, **big).seq_len == 4096


def test_a_job_request_is_the_list_of_workloads_it_runs():
    """Compare and Sweep hold the validated workloads the GPU function runs, in order."""
    shape = dict(dtype="float32", batch=1, heads=2, head_dim=32)
    sweep = job_request.sweep_request(
        ["naive", "sdpa-math", "naive"], [512, 256], "cpu", **shape, causal=True
    )
    points = [(w.variant, w.seq_len) for w in sweep.workloads]
    assert points == [("naive", 256), ("naive", 512), ("sdpa-math", 256), ("sdpa-math", 512)]
    assert sweep.seq_lens == [256, 512] and sweep.variants == ["naive", "sdpa-math"]
    assert all(w.dtype == "float32" and w.head_dim == 32 for w in sweep.workloads)
    compare = job_request.compare_request(
        ["sdpa-math", "naive"], "cpu", seq_len=128, **shape, causal=False
    )
    assert [w.variant for w in compare.workloads] == ["sdpa-math", "naive"]
    assert {(w.seq_len, w.causal) for w in compare.workloads} == {(128, False)}


# -- the rules' edges, read off what a caller gets back ---------------------------------------
def test_cpu_budget_is_inclusive_and_says_the_figures():
    at_limit = Workload.from_user(batch=5, heads=25, seq_len=1000, head_dim=80)  # 2·10¹⁰ FLOP
    assert at_limit.flops == workload.CPU_MAX_FLOPS
    workload.check_cpu_budget(at_limit, "cpu")  # exactly the budget: allowed
    over = at_limit.with_(seq_len=2000)
    with pytest.raises(ConfigError) as refused:
        workload.check_cpu_budget(over, "cpu")
    assert str(refused.value) == (
        "B5 H25 S2000 D80 bfloat16 needs 80 GFLOP per forward; on a CPU this app runs at most "
        "20: lower seq_len, batch or heads"
    )
    assert workload.passes(workload.check_cpu_budget, over, "cuda")  # the GPU has its slot
    assert not workload.passes(workload.check_cpu_budget, over, "cpu")
    assert workload.within_cpu_budget(at_limit, "cpu") and workload.within_cpu_budget(over, "cuda")
    assert not workload.within_cpu_budget(over, "cpu")


def test_a_shape_and_its_tag():
    made = Workload.from_user(variant="sdpa-math", causal=False)
    assert set(made.shape()) == set(workload.FIELDS) - {"variant"}
    assert made.shape_tag("cpu") == "8_16_1024_64_bfloat16_full_cpu_3steps"
    sweep_shape = {k: v for k, v in made.shape().items() if k != "seq_len"}  # lengths vary
    assert workload.shape_tag(sweep_shape, "cuda") == "8_16_64_bfloat16_full_cuda_3steps"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"seq_len": 100.5}, "seq_len must be a whole number, got 100.5"),
        ({"seq_len": "1024"}, "seq_len must be a whole number, got '1024'"),
        ({"batch": True}, "batch must be a whole number, got True"),
        ({"causal": "maybe"}, "causal must be true or false, got 'maybe'"),
        ({"variant": 3}, "variant must be text, got 3"),
        ({"zzz": 1, "bogus": 2}, "unknown parameter(s): bogus, zzz"),
        ({"batch": 64, "heads": 128, "seq_len": 131072, "head_dim": 256},
         "batch × heads × seq_len × head_dim exceeds 2³¹ elements per tensor; reduce one of them"),
    ],
)  # fmt: skip
def test_refusals_read_in_full(raw, message):
    with pytest.raises(ConfigError) as refused:
        Workload.from_user(**raw)
    assert str(refused.value) == message


def test_the_five_first_unknown_variants_are_named():
    with pytest.raises(ConfigError) as refused:
        known_variants(["a", "b", "c", "d", "e", "f"])
    assert str(refused.value).startswith("unknown variant(s): 'a', 'b', 'c', 'd', 'e'; choose")


@pytest.mark.parametrize(
    ("built", "message"),
    [
        ({"causal": "yes"}, "causal must be true or false"),
        ({"batch": True}, "batch must be a whole number"),
        ({"seq_len": 1024.0}, "seq_len must be a whole number"),
        ({"batch": 200}, "batch must be between 1 and 64, got 200"),
    ],
)
def test_a_workload_built_directly_is_checked_too(built, message):
    """Workload(...) skips from_user's coercion; validated() applies the same rules."""
    with pytest.raises(ConfigError) as refused:
        Workload(**built).validated()
    assert str(refused.value) == message


def test_a_missing_optional_field_does_not_stop_the_checks_after_it(monkeypatch):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class WithWindow(Workload):
        window: int | None = None

    # the optional field's rule comes first: the fields after it are still checked
    monkeypatch.setattr(workload, "LIMITS", {"window": (1, 131072), **workload.LIMITS})
    with pytest.raises(ConfigError, match="batch must be between 1 and 64, got 200"):
        WithWindow(batch=200).validated()


@pytest.mark.parametrize(("text", "value"), [("true", True), ("False", False), ("TRUE", True)])
def test_booleans_as_text(text, value):
    assert Workload.from_user(causal=text).causal is value


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (2**255, "578960446186580977...8792003956564819968"),  # 256 bits: still printed
        (2**256, "an integer of about 78 digits"),  # past 256 bits: only its size
        (10**400, "an integer of about 401 digits"),
        ("a" * 38, "'" + "a" * 38 + "'"),  # 40 characters: whole
        (["a" * 37], "['" + "a" * 37 + "…"),  # 41: cut to 39 and an ellipsis
    ],
)
def test_values_are_shown_shortened(value, shown):
    assert workload.show(value) == shown


def test_page_ranges_per_device():
    assert page_ranges("cuda")["seq_len"] == (128, 16384, 128)
    assert page_ranges("cpu")["seq_len"] == (64, 4096, 64)
    assert page_ranges("mps") == page_ranges("cpu")  # anything but CUDA gets the CPU's


@pytest.mark.parametrize("gpu", [True, False])
def test_resolve_device(monkeypatch, gpu):
    monkeypatch.setattr(workload.torch.cuda, "is_available", lambda: gpu)
    assert (
        workload.resolve_device() == workload.resolve_device("auto") == ("cuda" if gpu else "cpu")
    )
    assert workload.resolve_device("cpu") == "cpu"
    if gpu:
        assert workload.resolve_device("cuda") == "cuda"
    else:
        with pytest.raises(ConfigError) as refused:
            workload.resolve_device("cuda")
        assert str(refused.value) == (
            "device 'cuda' was asked for but this machine has no CUDA GPU; use 'cpu'"
        )
