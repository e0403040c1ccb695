"""How a large read uses the process's memory (profiling.trace.memory, issue 42): the heap the
read and the build freed is handed back, a small read (a run's own trace) is left alone, and
the table is the same either way."""

from __future__ import annotations

import json
import platform

import pandas as pd
import pytest

from profiling.trace import memory as trace_memory
from profiling.trace import model as trace_model

EVENTS = [{"ph": "X", "name": f"op{i}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i, "dur": 1}
          for i in range(10)]  # fmt: skip
DOCUMENT = json.dumps({"traceEvents": EVENTS}).encode()


def test_a_large_read_hands_its_freed_heap_back(monkeypatch):
    """glibc keeps freed pages resident under the analyses' new arrays (after a 10⁷-event read
    0.55 GB of 2.2 GB): malloc_trim after the read (its pieces freed) and after the build,
    from LARGE_READ events on; nothing after a smaller read."""
    calls: list[tuple] = []
    monkeypatch.setattr(trace_memory, "_libc", {"malloc_trim": lambda *a: calls.append(a)}.get)
    build = trace_model._build
    monkeypatch.setattr(trace_model, "_build", lambda r: calls.append(("build",)) or build(r))
    monkeypatch.setattr(trace_model, "LARGE_READ", 10)
    trace_model.load(DOCUMENT)
    assert calls == [(0,), ("build",), (0,)]
    calls.clear()
    monkeypatch.setattr(trace_model, "LARGE_READ", 11)
    trace_model.load(DOCUMENT)
    assert calls == [("build",)]


def test_the_table_is_the_same_whichever_way_memory_is_managed(monkeypatch):
    small = trace_model.load(DOCUMENT).spans
    monkeypatch.setattr(trace_model, "LARGE_READ", 10)
    pd.testing.assert_frame_equal(trace_model.load(DOCUMENT).spans, small)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibcs_malloc_trim_is_found():
    trace_memory._libc.cache_clear()
    assert trace_memory._libc("malloc_trim") is not None
    assert trace_memory._libc("no_such_function") is None
    trace_memory.trim_heap()
