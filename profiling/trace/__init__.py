"""Reading any Chrome trace torch.profiler writes — ours or a stranger's upload — into one
spans table, streamed so work and memory grow linearly with the file and stop at stated limits.

The door is `model.load` / `model.Trace` (a path or bytes → the spans table, lanes, links).
Behind it: `read` (who decodes each piece), `stream` (inflate on a thread, the expansion and
size limits, cuts between events), `scan` (the C scanner `scan.c` with `scan_json.h`, built
with the machine's cc on first use), `scan_columns` (its tables → a piece's columns),
`chunks` (msgspec for what the scanner declines), `helper` (the msgspec helper processes),
`columns` (merging the pieces), `nesting` (parents and display order), `events` (the event
and args types), `query` (questions asked of a spans table).

Decides: which args a span keeps, the spans' order, what the scanner reads and what it leaves
to msgspec. May import: the base modules only; never torch, attention or plotly.
"""
