"""Reading any Chrome trace torch.profiler writes — ours or a stranger's upload — into one
spans table, streamed so work and memory grow linearly with the file and stop at stated limits.

The door is `model.load` / `model.Trace` (a path or bytes → the spans table, lanes, links).
Behind it: `read` (who decodes each piece), `stream` (inflate on a thread, the expansion and
size limits, cuts between events), `scan` (the C scanner `scan.c` with `scan_json.h`, built
with the machine's cc on first use), `scan_columns` (its tables → a piece's columns),
`chunks` (msgspec for what the scanner declines), `helper` (the msgspec helper processes),
`columns` (merging the pieces), `nesting` (parents and display order; a lane whose spans
cross is nested again by scan.c's `renest`), `events` (the event and args types), `query`
(questions asked of a spans table), `memory` (how a large read uses the process's memory).

Decides: which args a span keeps, the spans' order, what the scanner reads and what it leaves
to msgspec. May import: the base modules only; never torch, attention or plotly.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- reading any trace (streamed: bounded memory, both cores): `profiling/trace/read.py`
  (`read_events`; `_Decoders` decides who reads a piece): `trace/stream.py` (gzip on a thread, the
  expansion limit, cuts between events, exact mode) with `trace/frame.py` (the one-pass, bounded
  scans that find the cuts; the limits on one event's size, nesting, and what follows the array;
  `trace_read.MAX_EVENTS` caps the count; hostile shapes pinned by
  `tests/trace/test_trace_hostile.py`), `trace/scan.py` (builds `profiling/trace/scan.c` with the
  machine's cc on first use, loads only a library this user owns in a folder no one else can write,
  logs once whether it is on, and calls it through ctypes on two threads) and
  `trace/scan_columns.py` (its tables → a piece's columns), `trace/chunks.py` (msgspec: a piece the
  scanner declines, or every piece without a compiler), `trace/helper.py` (the two helper processes
  msgspec runs in; one that dies fails the read), `trace_columns.merge_chunks` → `trace/model.py`
  (`load`); held equal to the whole-file reader it replaced (`tests/trace/legacy_reader.py`) by
  `tests/trace/test_trace_stream.py`, on both paths
- what the C scanner reads and what it leaves to msgspec (its output equal to msgspec's or
  nothing): `profiling/trace/scan_json.h` (JSON's grammar: strings, numbers and their exact
  conversion, any value skipped), `profiling/trace/scan.c` (the event and args keys it reads, a
  repeated one declined), `trace_scan_columns.scanned_columns` (interning by hash, each row's bytes
  checked); `tests/trace/test_trace_scan.py` holds it equal to `trace_chunks.decode_piece` piece by
  piece
- which args a span keeps (GPU work: all a view reads; a CPU op: its recorded shapes, one shared
  object per distinct shape, raw JSON until read): `profiling/trace/events.py` (`EventArgs`),
  `trace_chunks._shapes`, `trace_columns.merge_chunks`; a question about many ops' shapes is asked
  once per shared object (`trace_query.by_identity`)
- the spans' order (lane, start, the longest first among equal starts):
  `profiling/trace/nesting.py` (`display_order`, held equal to `np.lexsort` by
  `tests/trace/test_trace.py`)
- what device a trace ran on (its own `deviceProperties`; `sm_XY` only for NVIDIA, "unknown" where
  none), and Diff's line when two differ: `profiling/trace/device.py`; which of a host's devices
  its GPU work ran on (their ids among the GPU lanes' pids, else all): `Trace.devices_ran_on`
- how a large read uses the process's memory (the cyclic collector paused, numpy's huge pages
  off, the freed heap handed back after the read and the build): `profiling/trace/memory.py`,
  used by `trace/model.py` (`load`) and `analysis/analyze.py` (`from_trace`); pinned by
  `tests/trace/test_trace_memory.py`
- the scanner's state logged once per server, not per upload worker (`scan.SAID`, set for the
  workers by `views/upload_worker._start`)
"""
