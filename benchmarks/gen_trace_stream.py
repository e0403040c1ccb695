"""Torch.profiler-shaped Chrome traces of any size, written as a stream (issue #24).

    python benchmarks/gen_trace_stream.py --events 10000000 --out /tmp/trace_1e7.json.gz

benchmarks/gen_trace.py builds the whole event list in memory (fine up to 10⁶ events); this one
writes step by step through gzip, so a 10⁷-event (~2 GB) trace costs a few MB of memory. The
shape is what torch writes (tests/fixtures): the header keys before `traceEvents`
(`deviceProperties`, versions) and `traceName` after it; per ProfilerStep an `attn_fwd`
record_function; nested `cpu_op`s with torch's args (`External id`, `Record function id`,
`Ev Idx`, `Input Dims`, `Input type`); `cudaLaunchKernel` runtime calls; kernels, memcpy and
memset with their args on several streams; `ac2g` flow pairs; a backward on autograd's own
thread; `ph: M` lane names and `ph: i` markers. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path
from typing import IO

import msgspec

from benchmarks.gen_trace import KERNELS, OPS

PID, MAIN_TID, BACKWARD_TID, GPU = 418, 418, 422, 0
STREAMS = (7, 20, 24)
HEADER = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "Synthetic GPU", "totalGlobalMem": 150109880320,
                          "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
    "cupti_version": 130001, "cuda_runtime_version": 13000, "displayTimeUnit": "ms",
    "record_shapes": "1",  # torch adds it with record_shapes=True; the CPU ops carry Input Dims
}  # fmt: skip
_encode = msgspec.json.Encoder().encode


class _Writer:
    """Events written one by one, separated by commas, counted."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.count, self.corr, self.ext = out, 0, 0, 0

    def event(self, event: dict) -> None:
        self.out.write(b",\n" if self.count else b"\n")
        self.out.write(_encode(event))
        self.count += 1


def _x(cat: str, name: str, ts: float, dur: float, tid: int, args: dict, pid: int = PID) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3),
            "dur": round(dur, 3), "args": args}  # fmt: skip


def _launch_group(w: _Writer, rng: random.Random, t: float, tid: int, gpu_free: dict) -> float:
    """One operator with its inner ops, a launch, the GPU work and the flow pair between them."""
    w.corr += 1
    w.ext += 1
    op, inner = rng.choice(OPS[:5]), rng.choice(OPS[5:])
    dur = rng.uniform(8, 40)
    dims = [[8, 16, 1024, 64], [8, 16, 64, 1024]]
    w.event(
        _x(
            "cpu_op",
            op,
            t,
            dur,
            tid,
            {
                "External id": w.ext,
                "Record function id": 0,
                "Ev Idx": w.count,
                "Input Dims": dims,
                "Input type": ["c10::BFloat16"] * 2,
            },
        )
    )
    w.event(
        _x(
            "cpu_op",
            inner,
            t + 0.5,
            dur * 0.3,
            tid,
            {"External id": w.ext + 1, "Record function id": 0, "Ev Idx": w.count},
        )
    )
    w.event(_x("cpu_op", "aten::as_strided", t + 0.6, dur * 0.1, tid, {"External id": w.ext + 2}))
    launch = t + dur * 0.5
    w.event(
        _x(
            "cuda_runtime",
            "cudaLaunchKernel",
            launch,
            dur * 0.3,
            tid,
            {"External id": w.ext, "cbid": 211, "correlation": w.corr},
        )
    )
    name, cat, base = rng.choice(KERNELS)
    stream = rng.choice(STREAMS)
    start = round(max(gpu_free[stream], launch + rng.uniform(3, 9)), 3)
    length = round(base * rng.uniform(0.8, 1.2), 3)
    args = {"External id": w.ext, "stream": stream, "correlation": w.corr, "device": 0}
    if cat == "kernel":
        args |= {
            "registers per thread": 128,
            "shared memory": 49152,
            "grid": [8, 8, 16],
            "block": [128, 1, 1],
            "est. achieved occupancy %": 13,
        }
    w.event(_x(cat, name, start, length, stream, args, pid=GPU))
    w.event(
        {
            "ph": "s",
            "id": w.corr,
            "pid": PID,
            "tid": tid,
            "ts": round(launch, 3),
            "cat": "ac2g",
            "name": "ac2g",
        }
    )
    w.event(
        {
            "ph": "f",
            "id": w.corr,
            "pid": GPU,
            "tid": stream,
            "ts": start,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        }
    )
    gpu_free[stream] = start + length
    w.ext += 2
    return t + dur + rng.uniform(0.5, 3)  # fmt: skip


def write_events(out: IO[bytes], n_events: int, seed: int = 0) -> int:
    """About `n_events` events into `out` (a list's inside); returns how many were written."""
    rng = random.Random(seed)
    w = _Writer(out)
    w.event(
        {"name": "process_labels", "ph": "M", "pid": GPU, "tid": 0, "args": {"labels": "GPU 0"}}
    )
    for tid, label in ((MAIN_TID, "python3"), (BACKWARD_TID, "pt_autograd_0")):
        w.event({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid,
                 "args": {"name": f"thread {tid} ({label})"}})  # fmt: skip
    t, step = 1_000_000.0, 0
    gpu_free = dict.fromkeys(STREAMS, t)
    while w.count < n_events:
        step += 1
        step_start, fwd_start = t, t + 2.0
        t = fwd_start + 1.0
        for _ in range(rng.randint(20, 60)):
            t = _launch_group(w, rng, t, MAIN_TID, gpu_free)
        w.event(_x("user_annotation", "attn_fwd", fwd_start, t - fwd_start, MAIN_TID,
                   {"External id": 0, "Record function id": 0, "Ev Idx": w.count}))  # fmt: skip
        back = t + 1.0
        for _ in range(rng.randint(5, 15)):
            back = _launch_group(w, rng, back, BACKWARD_TID, gpu_free)
        synced = max(back, *gpu_free.values())  # the step ends waiting for the GPU, as .item() does
        w.event(_x("cuda_runtime", "cudaDeviceSynchronize", back, synced - back, MAIN_TID,
                   {"External id": 0, "cbid": 165, "correlation": 0}))  # fmt: skip
        back = synced
        w.event(_x("user_annotation", f"ProfilerStep#{step}", step_start, back - step_start + 1,
                   MAIN_TID, {"External id": 0}))  # fmt: skip
        w.event(
            {
                "name": "Iteration Start: PyTorch Profiler",
                "ph": "i",
                "s": "g",
                "pid": "Traces",
                "tid": "Trace PyTorch Profiler",
                "ts": round(step_start, 3),
            }
        )
        t = back + 5
    return w.count


def write(n_events: int, path: Path, seed: int = 0) -> Path:
    """A trace of about `n_events` events at `path` (.gz: gzip level 1, as fast to write)."""
    with open(path, "wb") as raw:
        out: IO[bytes] = (
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) if path.suffix == ".gz" else raw
        )  # type: ignore[assignment]
        head = _encode(HEADER)
        out.write(head[:-1] + b',"traceEvents":[')
        write_events(out, n_events, seed)
        out.write(b'\n],"traceName":"' + str(path.name).encode() + b'"}')
        if out is not raw:
            out.close()
    return path


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    print(write(a.events, a.out, a.seed))
