"""Which gzip inflater and JSON decoder to stream traces with (issue #24): measured, not assumed.

    python benchmarks/gen_trace.py --events 1000000 --out /tmp/trace_1e6.json.gz
    python benchmarks/bench_decoders.py /tmp/trace_1e6.json.gz

Inflate: zlib (the standard library) against python-isal's igzip (ISA-L), whole file. Decode:
the `traceEvents` array of the inflated JSON, each decoder alone in a fresh process (its own
peak RSS): json.loads, orjson.loads, msgspec's untyped decode, msgspec into the typed structs the
trace reader uses, and pysimdjson where installed. Each prints seconds, MB/s of JSON and peak
RSS; the best of 3 for the time. Then straight into columns, over the reader's own ~8 MiB
pieces of the array (profiling.trace.stream): ours (msgspec structs → numpy columns,
`trace_chunks.decode_piece`), the C scanner on one thread (`trace_scan_columns`), polars'
`read_json` with a schema of the fields the views read, and pyarrow's `read_json` after each
piece is rewritten as one event per line (its reader takes no JSON array); the last two only
where installed (they are not requirements).
"""

from __future__ import annotations

import gc
import gzip
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return min(times)


def inflate(kind: str, path: str) -> float:
    raw = Path(path).read_bytes()
    if kind == "zlib":
        return _best(lambda: gzip.decompress(raw))
    from isal import igzip

    return _best(lambda: igzip.decompress(raw))


def decode(kind: str, path: str) -> float:
    data = gzip.decompress(Path(path).read_bytes())
    if kind == "json":
        return _best(lambda: json.loads(data), 1)
    if kind == "orjson":
        import orjson

        return _best(lambda: orjson.loads(data), 1)
    if kind == "msgspec-any":
        import msgspec

        return _best(lambda: msgspec.json.decode(data), 1)
    if kind == "msgspec-typed":  # the structs the reader decodes a piece into, whole file
        from profiling.trace import events as trace_events

        return _best(lambda: trace_events.typed_events(data), 1)
    if kind.startswith("pieces-"):
        return _into_columns(kind.removeprefix("pieces-"), path)
    import simdjson  # pysimdjson: lazy proxies; the columns need every field touched

    def touch() -> None:
        events = simdjson.Parser().parse(data)["traceEvents"]
        for event in events:
            event.get("name"), event.get("ts"), event.get("dur"), event.get("cat")

    return _best(touch, 1)


def _into_columns(kind: str, path: str) -> float:
    from profiling.trace.stream import Framing, inflated, pieces

    parts = list(pieces(inflated(path, 2**34), Framing(), exact=True))
    if kind == "ours":
        from profiling.trace.chunks import decode_piece

        return _best(lambda: [decode_piece(part) for part in parts], 1)
    if kind == "scanner":
        from profiling.trace.scan import scanner
        from profiling.trace.scan_columns import scanned_columns

        scanner()  # built (or loaded) before the clock starts
        chunks = [scanned_columns(part) for part in parts]
        if any(chunk is None for chunk in chunks):
            raise SystemExit("the scanner declined a piece")
        return _best(lambda: [scanned_columns(part) for part in parts], 1)
    if kind == "polars":
        import polars

        schema = {"ph": polars.String, "cat": polars.String, "name": polars.String,
                  "pid": polars.String, "tid": polars.String, "ts": polars.Float64,
                  "dur": polars.Float64, "args": polars.Struct(_args_schema(polars))}  # fmt: skip
        return _best(lambda: [polars.read_json(part, schema=schema) for part in parts], 1)
    import pyarrow
    import pyarrow.json

    lines = [_one_per_line(part) for part in parts]  # not timed: the reader would pay it too
    options = pyarrow.json.ParseOptions(unexpected_field_behavior="ignore")
    return _best(lambda: [pyarrow.json.read_json(pyarrow.py_buffer(part), parse_options=options)
                          for part in lines], 1)  # fmt: skip


def _args_schema(polars: Any) -> dict[str, Any]:  # built where polars is imported
    ints, floats = polars.Int64, polars.Float64
    return {"correlation": ints, "External id": ints, "stream": ints, "device": ints,
            "grid": polars.List(ints), "block": polars.List(ints), "registers per thread": ints,
            "shared memory": ints, "blocks per SM": floats, "warps per SM": floats,
            "est. achieved occupancy %": ints, "bytes": ints, "memory bandwidth (GB/s)": floats,
            "Input Dims": polars.List(polars.List(ints)), "Input type": polars.List(polars.String),
            "Concrete Inputs": polars.List(polars.String)}  # fmt: skip


def _one_per_line(part: bytes) -> bytes:
    """A piece `[ev, ev, ...]` as one event per line (exact cuts: commas between events)."""
    from profiling.trace.stream import _scan

    body = bytearray(part)
    commas, close = _scan(body)
    for comma in commas.tolist():
        body[comma] = 0x0A  # newline
    body[0] = body[close] = 0x20
    return bytes(body)


def main() -> None:
    gc.disable()  # as the reader does: the collector's passes over 10⁶ objects dominate
    if sys.argv[1] == "--one":
        step, kind, path = sys.argv[2:5]
        seconds = (inflate if step == "inflate" else decode)(kind, path)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"s": seconds, "peak_mb": peak}))
        return
    path = sys.argv[1]
    size = len(gzip.decompress(Path(path).read_bytes()))
    print(f"{path}: {size / 1e6:.0f} MB of JSON\n")
    print("| step | how | s | MB/s | peak RSS MB |\n|---|---|---|---|---|")
    plan = [("inflate", k) for k in ("zlib", "isal")]
    plan += [("decode", k) for k in ("json", "orjson", "msgspec-any", "msgspec-typed", "simdjson")]
    plan += [("decode", f"pieces-{k}") for k in ("ours", "scanner", "polars", "pyarrow")]
    for step, kind in plan:
        done = subprocess.run(
            [sys.executable, __file__, "--one", step, kind, path], capture_output=True, text=True
        )
        if done.returncode:
            print(f"| {step} | {kind} | {done.stderr.strip().splitlines()[-1]} | | |")
            continue
        row = json.loads(done.stdout)
        rate = size / 1e6 / row["s"]
        print(f"| {step} | {kind} | {row['s']:.2f} | {rate:.0f} | {row['peak_mb']:.0f} |")


if __name__ == "__main__":
    main()
