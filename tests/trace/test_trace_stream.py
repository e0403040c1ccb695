"""The streaming trace reader (issue #24) against the whole-file reader it replaced.

tests/trace/legacy_reader.py is the reader as it stood: the streaming one must build the same spans
table, metadata and counts on every fixture and on generated traces (cut into many pieces, with
the helper process, in fast and exact mode), refuse truncated and malformed streams with a
TraceError (never a partial table), and read in bounded memory (checked in a child process).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
import pytest

from benchmarks.gen_trace_stream import write
from profiling.trace import helper as trace_helper
from profiling.trace import model as trace_model
from profiling.trace import read as trace_read
from profiling.trace import scan as trace_scan
from profiling.trace import scan_columns as trace_scan_columns
from profiling.trace import stream as trace_stream
from profiling.trace.chunks import SHAPE_KEYS
from profiling.trace.events import TraceError, TraceTooBig, span_args
from tests.trace import legacy_reader

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.json.gz"))


def assert_same(path_or_bytes, **load_options) -> trace_model.Trace:
    """The streaming reader's trace equals the whole-file reader's, column by column."""
    new = trace_model.load(path_or_bytes, **load_options)
    old = legacy_reader.load(path_or_bytes)
    pd.testing.assert_frame_equal(new.spans.drop(columns="args"), old.spans.drop(columns="args"))
    assert [span_args(a) for a in new.spans["args"]] == kept_args(old.spans)
    assert new.meta == old.meta and new.lanes == old.lanes
    assert (new.n_events, new.n_flows, new.skipped, new.t0_us) == (
        old.n_events, old.n_flows, old.skipped, old.t0_us,
    )  # fmt: skip
    return new


def kept_args(spans: pd.DataFrame) -> list[dict]:
    """The whole-file reader's args as the streaming reader keeps them: GPU work's whole,
    a CPU op's recorded shapes alone (one shared object per distinct shape)."""
    found = [span_args(a) for a in spans["args"]]
    return [
        args if kind == "gpu" else {k: args[k] for k in SHAPE_KEYS if args.get(k) is not None}
        for args, kind in zip(found, spans["kind"], strict=True)
    ]


@pytest.fixture(params=["scanned", "msgspec"])
def small_pieces(request, monkeypatch):
    """Pieces of 4 KiB, read by the C scanner on threads or (without it) by msgspec in the
    helper processes from the second piece on: every cut, merge, thread and process boundary
    a gigabyte trace meets, on a trace of a few thousand events."""
    monkeypatch.setattr(trace_stream, "PIECE", 4096)
    monkeypatch.setattr(trace_stream, "BLOCK", 4096)
    monkeypatch.setattr(trace_read, "HELPER_AFTER", 1)
    if request.param == "msgspec":
        monkeypatch.setattr(trace_scan, "scanner", lambda: None)
    elif trace_scan.scanner() is None:
        pytest.skip(f"no C scanner here: {trace_scan.REASON}")
    return request.param


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name.split("_8_")[0])
def test_every_fixture_reads_as_the_whole_file_reader_read_it(path, small_pieces):
    assert_same(path)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    return write(6000, tmp_path_factory.mktemp("gen") / "trace.json.gz", seed=3)


def test_a_generated_trace_in_many_pieces_through_the_helper(generated, small_pieces):
    trace = assert_same(generated)
    assert trace.has_gpu and len(trace.spans) > 4000 and trace.n_flows > 500
    assert trace.device_properties[0]["name"] == "Synthetic GPU"
    assert trace.meta["traceName"] == "trace.json.gz"


@pytest.mark.parametrize("small_pieces", ["msgspec"], indirect=True)  # every piece to a helper
def test_the_helpers_start_whatever_folder_the_reader_runs_in(
    generated, small_pieces, tmp_path, monkeypatch
):
    """`python /path/to/app.py` or the CLI from another folder: the helper processes import
    this checkout (they were given profiling/ itself as their path and died at once)."""
    monkeypatch.chdir(tmp_path)
    assert len(trace_model.load(generated).spans) > 4000


def test_pieces_the_scanner_declines_merge_with_the_ones_it_reads(
    generated, small_pieces, monkeypatch
):
    """Non-ASCII names in a few events send their pieces to msgspec in the helpers while the
    scanner reads the rest: one table, the whole-file reader's."""
    document = msgspec.json.decode(gzip.decompress(generated.read_bytes()))
    for event in document["traceEvents"][500::1500]:
        event["name"] = "naïve " + str(event.get("name"))
    answers = []
    real = trace_read.scanned_columns
    monkeypatch.setattr(
        trace_read, "scanned_columns", lambda *a: answers.append(real(*a)) or answers[-1]
    )
    assert_same(msgspec.json.encode(document))
    if small_pieces == "scanned":
        declined = sum(answer is None for answer in answers)
        assert 3 <= declined < len(answers) / 10, (declined, len(answers))


def test_the_same_trace_pretty_printed_plain_and_as_a_bare_array(generated, small_pieces):
    document = msgspec.json.decode(gzip.decompress(generated.read_bytes()))
    assert_same(msgspec.json.format(msgspec.json.encode(document), indent=2))  # torch's layout
    assert_same(json.dumps(document["traceEvents"]).encode())  # `}, {`, no top-level object


def test_cut_lookalikes_inside_strings_send_the_reader_to_exact_mode(small_pieces, monkeypatch):
    """Names holding `},{`, `"` and `\\` fool the fast cut; the decoder notices, and the exact
    scan (which knows strings and escapes) reads the same table as the whole-file reader."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f'op "{i}"}},{{\\"x', "pid": 1, "tid": 1,
         "ts": float(i * 10), "dur": 5.0, "args": {"note": "]}, {[", "External id": i}}
        for i in range(400)
    ]  # fmt: skip
    data = json.dumps({"traceEvents": events, "after": [{"a": 1}, {"b": "},{"}]}).encode()
    modes = []
    real = trace_read._read
    monkeypatch.setattr(
        trace_read, "_read", lambda *a, **k: modes.append(k["exact"]) or real(*a, **k)
    )
    trace = assert_same(data)
    assert modes == [False, True] and len(trace.spans) == 400
    assert trace.meta["after"] == [{"a": 1}, {"b": "},{"}]


def _refused(data: bytes, tmp_path: Path, name: str = "t.json") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(TraceError) as caught:
        trace_model.load(path)
    with pytest.raises(TraceError):
        legacy_reader.load(path)  # the old reader refused it too
    return str(caught.value)


def test_truncated_and_malformed_streams_are_refused_whole(generated, tmp_path, small_pieces):
    data = gzip.decompress(generated.read_bytes())
    middle = len(data) // 2
    assert "cut short" in _refused(gzip.compress(data)[:-5000], tmp_path, "t.json.gz")
    assert "never closes" in _refused(data[:middle], tmp_path)
    between = data.index(b"},\n{", middle)  # one brace too many between two events
    assert "not valid JSON" in _refused(data[:between] + b"}" + data[between:], tmp_path)
    broken = data.replace(b'"dur":', b'"dur";', 1)
    assert "not valid JSON" in _refused(broken, tmp_path)
    assert "not valid JSON" in _refused(data + b"{", tmp_path)
    assert "no `traceEvents`" in _refused(b'{"other": [1, 2]}', tmp_path)


def test_the_expansion_limit_holds_while_streaming(generated):
    size = len(gzip.decompress(generated.read_bytes()))
    with pytest.raises(TraceTooBig, match="expands to more than"):
        trace_model.load(generated, max_bytes=size - 1)
    assert len(trace_model.load(generated, max_bytes=size).spans)


def test_progress_reaches_the_end(generated, small_pieces):
    seen: list[float] = []
    trace_model.load(generated, progress=seen.append)
    assert seen and seen == sorted(seen) and seen[-1] == 1.0


_MEASURE = """
import sys
from profiling.trace import model as trace

def kib(key):
    status = open("/proc/self/status").read().split(key + ":")[1]
    return int(status.split()[0])

with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # Linux: the peak (VmHWM) restarts from the resident size now
before = kib("VmRSS")
{load}(sys.argv[1])
print(kib("VmHWM") - before)
"""


def _peak_growth_kib(path: Path, load: str) -> int:
    """Peak RSS of one load in a fresh process, less its resident size after the imports (the
    peak is reset first: an import's transient peak can exceed a small load's)."""
    program = _MEASURE.format(load=load)
    if load.startswith("legacy"):
        program = "from tests.trace import legacy_reader\n" + program
    done = subprocess.run(
        [sys.executable, "-c", program, str(path)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return int(done.stdout.split()[-1])


def test_memory_is_bounded_by_columns_not_by_the_json(tmp_path):
    """Each reader in a fresh process, on 10⁵ and 5·10⁵ events (17 and 86 MB of JSON): what
    the extra 4·10⁵ events add to the peak. The whole-file reader held their JSON and a struct
    each (~880 bytes per event); the streaming one holds a few pieces, however long the file,
    and the columns (~190 bytes per event). A reader that kept every piece's JSON (170 bytes
    per event) measured 0.38 of the whole-file reader's growth and fails here. Growth, not the
    peak: a small trace's peak is mostly fixed costs (pieces in flight, each scanning thread's
    tables), measured at 10⁶ and 10⁷ in docs/performance.md."""
    small = write(100_000, tmp_path / "small.json", seed=1)
    big = write(500_000, tmp_path / "big.json", seed=1)
    streamed = _peak_growth_kib(big, "trace.load") - _peak_growth_kib(small, "trace.load")
    whole = _peak_growth_kib(big, "legacy_reader.load") - _peak_growth_kib(
        small, "legacy_reader.load"
    )
    assert 0 < streamed < 0.3 * whole, (streamed, whole)


def test_pieces_are_whole_events(generated, monkeypatch):
    monkeypatch.setattr(trace_stream, "PIECE", 1000)
    monkeypatch.setattr(trace_stream, "BLOCK", 1000)
    framing = trace_stream.Framing()
    blocks = trace_stream.inflated(generated, 2**30)
    counts = [len(msgspec.json.decode(p)) for p in trace_stream.pieces(blocks, framing, False)]
    assert len(counts) > 100 and sum(counts) == legacy_reader.load(generated).n_events
    assert "deviceProperties" in framing.meta and "traceName" in framing.meta
    assert np.all(np.array(counts) >= 1)


def test_cpu_ops_share_one_args_object_per_distinct_shape(small_pieces):
    """A shaped op keeps its shapes alone, and ops with equal shapes share one object across
    pieces and processes: at 10⁷ events, millions of per-op args were 1.5 GB of the peak."""
    trace = trace_model.load(ROOT / "tests/fixtures/h200_user-naive_8_16_1024_64_bf16.json.gz")
    cpu = trace.spans[trace.spans["kind"] == "cpu"]["args"]
    shaped = [a for a in cpu if span_args(a)]
    distinct = {msgspec.json.encode(sorted(span_args(a).items())) for a in shaped}
    assert len(shaped) > 2 * len(distinct)
    assert len({id(a) for a in shaped}) == len(distinct)
    assert all(set(span_args(a)) <= set(SHAPE_KEYS) for a in shaped)


def test_a_helper_that_dies_fails_the_read_instead_of_hanging(generated, small_pieces, monkeypatch):
    """Killed or out of memory mid-trace: every piece it held, and every piece sent after,
    fails with a clear error (a piece submitted after it died once waited forever). With the
    scanner, the helpers read only the pieces it declines: here, all of them."""
    monkeypatch.setattr(trace_scan_columns.scan, "scan", lambda piece: None)
    monkeypatch.setattr(trace_helper, "COMMAND", [sys.executable, "-c", "import os; os.read(0, 9)"])
    reading = ThreadPoolExecutor(1).submit(trace_read.read_events, generated, 2**30)
    with pytest.raises(RuntimeError, match="helper process died"):
        reading.result(timeout=60)
