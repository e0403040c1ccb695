"""Which gzip inflater and JSON decoder to stream traces with (issue #24): measured, not assumed.

    python benchmarks/gen_trace.py --events 1000000 --out /tmp/trace_1e6.json.gz
    python benchmarks/bench_decoders.py /tmp/trace_1e6.json.gz

Inflate: zlib (the standard library) against python-isal's igzip (ISA-L), whole file. Decode:
the `traceEvents` array of the inflated JSON, each decoder alone in a fresh process (its own
peak RSS): json.loads, orjson.loads, msgspec's untyped decode, msgspec into the typed structs the
trace reader uses, and pysimdjson where installed. Each prints seconds, MB/s of JSON and peak
RSS; the best of 3 for the time.
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
        from profiling import trace_events

        return _best(lambda: trace_events.typed_events(data), 1)
    import simdjson  # pysimdjson: lazy proxies; the columns need every field touched

    def touch() -> None:
        events = simdjson.Parser().parse(data)["traceEvents"]
        for event in events:
            event.get("name"), event.get("ts"), event.get("dur"), event.get("cat")

    return _best(touch, 1)


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
