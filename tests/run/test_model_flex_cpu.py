"""flex_attention inside the tiny model on a CPU (issue 43: "the tiny preset runs every
implementation that a CPU can run"): transformers compiles flex_attention, Inductor builds C++
for it here, and the run reports its attention kernels, its share and its logits error like
the others; without a C++ compiler it is refused with that reason."""

from __future__ import annotations

import shutil

import pytest

from profiling.run.model.runner import run
from profiling.workload.model.spec import ModelWorkload

RAGGED = {"batch": 2, "seq_len": 32, "lengths": "32,20", "dtype": "float32", "steps": 1}


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="no C++ compiler")
def test_flex_attention_runs_in_the_tiny_model_on_a_cpu(tmp_path):
    workload = ModelWorkload.from_user(
        preset="tiny", layers=1, implementations="eager,flex_attention", **RAGGED
    )
    runs = {item.id: item for item in run(workload, tmp_path).runs}
    flex = runs["flex_attention"]
    assert flex.ok, flex.refused or flex.failed
    assert flex.ran == "flex_attention"
    assert flex.logits_error is not None and flex.logits_error < 1e-4  # float32, same model
    assert flex.split.categories["attention"] > 0  # its kernels were found in the step
    assert flex.attention_kernels  # and named
    assert flex.pad.pad_flops < runs["eager"].pad.pad_flops  # the block mask skips pad tiles


def test_without_a_cpp_compiler_flex_is_refused_with_that_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++ / c++ to be found
    workload = ModelWorkload.from_user(
        preset="tiny", layers=1, implementations="flex_attention", check=False, **RAGGED
    )
    (flex,) = run(workload, tmp_path).runs
    assert "needs a C++ compiler for Inductor" in flex.refused
