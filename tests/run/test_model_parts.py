"""A model run's parts, as benchmarks/model_overhead.py --split times them (issue 43's
overhead): the runner's lap hook names each part in the order it runs; the trace's .json.gz is
written beside the trace's read and is whole; the collector scans only what the run made, and
still frees the cycles the run leaves."""

from __future__ import annotations

import gc
import gzip
import json
import weakref
from pathlib import Path

import pytest

from benchmarks import model_overhead
from profiling.run.model import runner
from profiling.run.model.runner import run
from profiling.workload.model.spec import ModelWorkload

RAGGED = {"batch": 2, "seq_len": 32, "lengths": "32,20", "steps": 1}
EACH = [
    "set implementation", "first call (SDPA's caught)", "warm-up", "SDPA account",
    "profiled steps", "timed steps", "logits check", "export trace", "read trace",
    "split + backend", "gantt", "gzip (what was left of it)", "release",
]  # fmt: skip


def test_the_lap_hook_names_each_part_in_order_and_the_collector_is_frozen_meanwhile(tmp_path):
    parts, frozen = [], []

    def lap(part: str) -> None:
        parts.append(part)
        frozen.append(gc.get_freeze_count())

    workload = ModelWorkload.from_user(preset="tiny", implementations="eager,sdpa", **RAGGED)
    result = run(workload, tmp_path, lap=lap)
    assert parts == ["validate + memory check", "build + batch", "float32 reference",
                     *EACH, *EACH, "release"]  # fmt: skip
    assert all(count > 0 for count in frozen[1:])  # the objects older than the run, set aside
    assert gc.get_freeze_count() == 0  # and handed back after it
    for item in result.runs:
        with gzip.open(item.trace) as packed:  # whole: the gzip thread finished before return
            assert "traceEvents" in json.load(packed)
    assert sorted(path.name for path in Path(tmp_path).iterdir()) == [
        "model-eager.json.gz", "model-sdpa.json.gz",
    ]  # fmt: skip


def test_a_cycle_the_run_makes_is_still_freed_and_the_freeze_ends_on_an_error():
    class Node:
        pass

    with pytest.raises(RuntimeError), runner._older_objects_set_aside():
        node = Node()
        node.itself = node
        alive = weakref.ref(node)
        del node
        runner._release("cpu")
        assert alive() is None
        raise RuntimeError("an implementation broke")
    assert gc.get_freeze_count() == 0


def test_the_benchmark_s_split_names_the_parts_of_both_and_they_add_up(tmp_path):
    workload = ModelWorkload.from_user(
        preset="tiny", implementations="sdpa", device="cpu", **model_overhead.TINY
    ).validated()
    bare, app = model_overhead.split_once({"sdpa": workload}, workload, "cpu", tmp_path)
    assert list(bare.parts) == [
        "build + batch", "warm-up", "profiled steps", "export trace (.json.gz)",
        "key_averages table",
    ]  # fmt: skip
    assert list(app.parts)[:3] == ["validate + memory check", "build + batch", "float32 reference"]
    assert list(app.parts)[-2:] == ["views", "Gantt JSON"]
    for laps in (bare, app):
        assert sum(laps.parts.values()) == pytest.approx(laps.total, rel=1e-9)
    table = model_overhead.split_table([bare], [app]).splitlines()
    assert table[:2] == ["| part | bare ms | app ms |", "|---|---:|---:|"]
    assert table[2] == f"| build + batch | {bare.parts['build + batch'] * 1e3:.1f} |  |"
    assert table[-1].startswith(f"| **total** | **{bare.total * 1e3:.1f}** |")
    assert len(table) == 2 + len(bare.parts) + len(app.parts) + 1


def test_objects_made_after_an_earlier_freeze_are_set_aside_too():
    """On the GPU machine an imported library had frozen 375 objects: a guard that left such a
    freeze alone set nothing aside, and each release's collection scanned ~447k objects
    (~0.25 s, twice a click)."""
    kept = [object() for _ in range(3)]
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        made_since = [[index] for index in range(1000)]
        with runner._older_objects_set_aside():
            assert gc.get_freeze_count() >= before + len(made_since)
        assert gc.get_freeze_count() == 0  # one permanent generation: handed back whole
    finally:
        gc.unfreeze()
    assert kept and made_since
