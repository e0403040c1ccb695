"""The hostile uploads of issue 32, generated, each read by `python -m profiling analyze` in a
fresh process: wall time, peak RSS, and the first line of what it said.

    python benchmarks/hostile_shapes.py [--out DIR] [--only NAME,...]

Shapes (each a small gzip): `braces` one event whose name is 256 MiB of `}`; `nested` 200k
identical spans nested in one another; `head` 160k `"traceEvents":[` in a string before the
real key; `tiny` 10⁷ events `{}` (read: under the 2·10⁷ cap); `tiny_past_cap` 2.1·10⁷ of them
(refused); `deep` 16 MiB of `[` in one event.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPAN = {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 10.0}


def _gzip_stream(path: Path, parts) -> Path:
    with gzip.open(path, "wb", compresslevel=6) as out:
        for part in parts:
            out.write(part)
    return path


def _repeat(chunk: bytes, times: int, block: int = 1 << 16):
    per = max(block // len(chunk), 1)
    for start in range(0, times, per):
        yield chunk * min(per, times - start)


def braces(path: Path) -> Path:
    head = b'{"traceEvents":[{"ph":"X","cat":"cpu_op","pid":1,"tid":1,"ts":1,"dur":1,"name":"'
    return _gzip_stream(path, [head, *_repeat(b"}", 256 * 1024**2), b'"}]}'])


def nested(path: Path) -> Path:
    one = json.dumps(SPAN).encode()
    return _gzip_stream(path, [b'{"traceEvents":[', one, *_repeat(b"," + one, 199_999), b"]}"])


def head(path: Path) -> Path:
    noise = [b'{"note":"', *_repeat(b'\\"traceEvents\\":[', 160_000), b'",']
    return _gzip_stream(path, [*noise, b'"traceEvents":[', json.dumps(SPAN).encode(), b"]}"])


def _tiny(path: Path, n: int) -> Path:
    return _gzip_stream(path, [b'{"traceEvents":[{}', *_repeat(b",{}", n - 1), b"]}"])


def tiny(path: Path) -> Path:
    return _tiny(path, 10_000_000)


def tiny_past_cap(path: Path) -> Path:
    return _tiny(path, 21_000_000)


def deep(path: Path) -> Path:
    start = b'{"traceEvents":[{"ph":"X","cat":"cpu_op","pid":1,"tid":1,"ts":1,"dur":1,"args":'
    return _gzip_stream(path, [start, *_repeat(b"[", 16 * 1024**2)])


SHAPES = {f.__name__: f for f in (braces, nested, head, tiny, tiny_past_cap, deep)}


def measure(path: Path) -> dict:
    began = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "profiling", "analyze", str(path)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines[:-1] if not line.startswith("Command exited")]
    said = (done.stdout.strip().splitlines() or [""])[0] if done.returncode == 0 else errors[-1]
    return {
        "seconds": round(time.perf_counter() - began, 2),
        "peak_gb": round(int(lines[-1]) / 1024**2, 2),
        "gzip_kb": round(path.stat().st_size / 1024, 1),
        "exit": done.returncode,
        "said": said[:160],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", default=",".join(SHAPES))
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="hostile-"))
    for name in args.only.split(","):
        path = SHAPES[name](folder / f"{name}.json.gz")
        print(name, json.dumps(measure(path)), flush=True)


if __name__ == "__main__":
    main()
