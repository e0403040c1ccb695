"""A run's trace is read once (issue 18, point 3): one file read and one JSON decode per
Profile click, and per variant of a Compare.

Every profiling module's binding of the trace reader and of the two JSON decoders is wrapped
with a counter, so a second read anywhere on the path (a view parsing the trace again for its
launch statistics, say) is counted wherever it is made. A read counts when it opens a file;
the reader also takes bytes already read, which is no second read.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from profiling.jobs import compare
from profiling.run import records as small_trace
from profiling.run import trace as run_trace
from profiling.trace import events as trace_events
from profiling.trace import model as trace
from profiling.trace import read as trace_read
from profiling.workload.spec import Workload
from tests.conftest import FIXTURES

# each reader by its module: a file read, the records' decoder, the model's streamed decoder
READERS = {"read_bytes": trace_events, "typed_events": trace_events, "read_events": trace_read}
TINY = dict(variant="naive", seq_len=64, dtype="float32", batch=1, heads=1, head_dim=16,
            causal=True)  # fmt: skip


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Counts of each reader's calls, from every profiling module that holds one."""
    counts: Counter = Counter()
    for name, home in READERS.items():
        original = getattr(home, name)
        counted = _counting(name, original, counts)
        for module in [m for key, m in sys.modules.items() if key.startswith("profiling")]:
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counted)
    return counts


def _counting(name: str, original: Callable[..., Any], counts: Counter) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        if name != "read_bytes" or not isinstance(args[0], bytes):
            counts[name] += 1
        if name == "read_events" and not isinstance(args[0], bytes):
            counts["read_bytes"] += 1  # the streamed reader opens a path itself: a file read
        return original(*args, **kwargs)

    return counted


def _decodes(counts: Counter) -> int:
    return counts["read_events"] + counts["typed_events"]


def test_a_profile_click_reads_its_trace_once(reads):
    from profiling.page import profile_tab

    profile_tab.profile(**TINY, progress=lambda *args, **kwargs: None)
    assert reads["read_bytes"] == 1 and _decodes(reads) == 1, dict(reads)


def test_a_run_the_plain_reader_declines_is_read_once_too(reads, monkeypatch):
    """The trace-model path (a trace too big or too untidy for the records): the bytes read
    once go to the model, and nothing reads the file again for the page."""
    from profiling.page import profile_tab

    monkeypatch.setattr(small_trace, "MAX_EVENTS", 0)
    _, summary, *_ = profile_tab.profile(**TINY, progress=lambda *args, **kwargs: None)
    assert reads["read_bytes"] == 1 and reads["read_events"] == 1, dict(reads)
    assert summary["forwards"] == 3 and summary["launch"]["has_gpu"] is False


def test_a_compare_row_reads_its_trace_once(reads, tmp_path):
    config = Workload.from_user(**TINY, device="cpu")
    row = compare.profile_one(config, tmp_path, lambda fraction, text: None)
    assert row.status == "ok" and row.launch is not None and not row.timeline.empty
    assert reads["read_bytes"] == 1 and _decodes(reads) == 1, dict(reads)


def test_the_counter_sees_each_reader(reads, tmp_path):
    """The wrapping reaches both readers' decoders and both ways of reading a file."""
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "ts": 0,'
                    ' "dur": 1, "pid": 1, "tid": 1}]}')  # fmt: skip
    assert run_trace.read(path).reader == run_trace.RECORDS
    assert dict(reads) == {"read_bytes": 1, "typed_events": 1}
    small_trace.read(path)
    trace.load(path)
    assert dict(reads) == {"read_bytes": 3, "typed_events": 2, "read_events": 1}


# The run's trace object on a machine without torch, before anything loads plotly: a child
# process (this one has both loaded), reading a fixture through each reader.
CHILD = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ImportError(f"torch is not installed here (import {{name}})")

sys.meta_path.insert(0, NoTorch())
from profiling.run import trace as run_trace
from profiling.run import records as small_trace
for reader in ("records", "table"):
    if reader == "table":
        small_trace.parse = lambda data: None
    read = run_trace.read({path!r})
    assert read.reader == reader and read.stats.forwards == 3
    assert read.launch_stats().launches and read.gantt("t").data and len(read.columns())
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "attention", "plotly"))
assert not loaded, f"loaded {{loaded[:5]}}"
"""


def test_the_trace_object_needs_neither_torch_nor_plotly():
    path = str(FIXTURES / "h200_sdpa-math_8_16_1024_64_bf16.json.gz")
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(path=path)], capture_output=True, text=True,
        timeout=120, cwd=FIXTURES.parents[1],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
