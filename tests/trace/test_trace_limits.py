"""Issue 41: the upload limits at their real values, as README and the messages state them:
nesting past 1000 levels, one event past 64 MiB, more than 20,000,000 events. The hostile-shape
tests (test_trace_hostile.py) lower the limits to be quick, so a limit ten times too large
passed them all; these read the limits as shipped, with the number written out, each just
past its limit and at it. (MAX_EVENT ×10 lets one event take 640 MiB.)"""

from __future__ import annotations

import pytest

from profiling.trace import model as trace_model
from profiling.trace import read as trace_read
from profiling.trace import stream as trace_stream
from profiling.trace.events import TraceError

MiB = 1024**2


def _nested(levels: int) -> bytes:
    """One complete event whose args nest `levels` arrays deep: its `{`, the args' `{`, then
    the arrays, so the deepest bracket is at depth levels + 2 inside the events array."""
    return (
        b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":{"x":'
        + b"[" * levels
        + b"]" * levels
        + b"}}]}"
    )


def test_nesting_past_1000_levels_is_refused_by_the_limit():
    with pytest.raises(
        TraceError, match=r"^not valid JSON \(nested too deeply: more than 1000 levels\)$"
    ):
        trace_model.load(_nested(999))  # depth 1001
    with pytest.raises(TraceError, match=r"^not valid JSON \(nested too deeply\)$"):
        trace_model.load(_nested(998))  # depth 1000: past the framing, refused by the decoder


def _one_event(name_bytes: int) -> bytes:
    """One event with a name of `name_bytes`, then 10⁵ small ones (as a trace goes on)."""
    event = b'{"ph":"X","cat":"cpu_op","name":"' + b"a" * name_bytes + b'","pid":1,"tid":1,'
    small = b',{"ph":"X","name":"b","pid":1,"tid":1,"ts":3,"dur":1}' * 100_000
    return b'{"traceEvents":[' + event + b'"ts":1,"dur":1}' + small + b"]}"


def _framed(data: bytes) -> list[bytes]:
    """The exact framing's pieces (where the limit is decided: the fast one hands a stretch it
    cannot cut to it)."""
    blocks = (data[i : i + trace_stream.BLOCK] for i in range(0, len(data), trace_stream.BLOCK))
    return list(trace_stream.pieces(blocks, trace_stream.Framing(), True))


def test_one_event_past_64_mib_is_refused():
    """Checked as each inflated block arrives: an event whose end is in the block that takes
    it past 64 MiB is read; one a block longer is refused before its end arrives."""
    with pytest.raises(TraceError, match=r"one event of the trace is larger than 64 MiB"):
        _framed(_one_event(64 * MiB + trace_stream.BLOCK + 1024))


def test_one_event_under_64_mib_is_framed():
    assert sum(len(piece) for piece in _framed(_one_event(63 * MiB))) > 63 * MiB


def _empty_events(count: int) -> bytes:
    return b'{"traceEvents":[' + b",".join([b"{}"] * count) + b"]}"


def test_more_than_20_million_events_are_refused():
    """2·10⁷ + 1 empty events (60 MB, ~2 s): refused by the count; 2·10⁷ pass the count and are
    refused for what they are (no complete event), not for their number."""
    with pytest.raises(TraceError, match=r"the trace has more than 20,000,000 events"):
        trace_read.read_events(_empty_events(20_000_001), 2**31)
    with pytest.raises(TraceError, match=r"holds no complete"):
        trace_read.read_events(_empty_events(20_000_000), 2**31)
