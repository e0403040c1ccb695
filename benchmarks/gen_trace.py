"""Generate torch.profiler-like Chrome traces of any size, for the scale benchmarks (issue #7).

    python benchmarks/gen_trace.py --events 1000000 --out /tmp/trace_1e6.json.gz

The shape follows what torch writes (see h200-baseline.md): ProfilerStep and attn_fwd
annotations, nested `cpu_op` spans, `cuda_runtime` launches, kernels/memcpy/memset on two GPU
streams with real-looking args, `ac2g` flow pairs, and the `ph: M` lane names. Deterministic.
"""

from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path

import msgspec

KERNELS = [
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "kernel", 84.0),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16,"
     " c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >", "kernel",
     127.0),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10>",
     "kernel", 283.0),
    ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 125.0),
    ("Memset (Device)", "gpu_memset", 0.8),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>", "kernel",
     96.0),
]  # fmt: skip
OPS = ["aten::matmul", "aten::bmm", "aten::mul", "aten::masked_fill", "aten::softmax",
       "aten::_softmax", "aten::copy_", "aten::empty", "aten::view", "aten::expand"]  # fmt: skip
PID, TID, GPU = 418, 418, 0


def generate(n_events: int, seed: int = 0) -> dict:
    """About `n_events` events; each launch group adds 6 (3 ops, runtime, kernel, 2 flows)."""
    rng = random.Random(seed)
    events: list[dict] = [
        {"name": "process_labels", "ph": "M", "pid": GPU, "tid": 0, "args": {"labels": "GPU 0"}},
        {"name": "thread_name", "ph": "M", "pid": PID, "tid": TID,
         "args": {"name": "thread 418 (python3)"}},
    ]  # fmt: skip
    t = 1_000_000.0
    gpu_free = {7: t, 20: t}
    corr = ext = 0
    step = 0
    while len(events) < n_events:
        step += 1
        step_start = t
        groups = rng.randint(20, 60)
        fwd_start = t + 2.0
        t = fwd_start + 1.0
        for _ in range(groups):
            corr += 1
            ext += 1
            op, inner = rng.choice(OPS[:5]), rng.choice(OPS[5:])
            op_start, op_dur = t, rng.uniform(8, 40)
            events.append(_x("cpu_op", op, op_start, op_dur, PID, TID, {"External id": ext}))
            events.append(_x("cpu_op", inner, op_start + 0.5, op_dur * 0.3, PID, TID, {}))
            events.append(_x("cpu_op", "aten::as_strided", op_start + 0.6, op_dur * 0.1, PID, TID,
                             {}))  # fmt: skip
            launch = op_start + op_dur * 0.5
            events.append(_x("cuda_runtime", "cudaLaunchKernel", launch, op_dur * 0.3, PID, TID,
                             {"External id": ext, "correlation": corr}))  # fmt: skip
            name, cat, base = rng.choice(KERNELS)
            stream = 7 if rng.random() < 0.9 else 20
            start = round(max(gpu_free[stream], launch + rng.uniform(3, 9)), 3)
            dur = round(base * rng.uniform(0.8, 1.2), 3)
            args = {"External id": ext, "stream": stream, "correlation": corr, "device": 0}
            if cat == "kernel":
                args |= {"registers per thread": 128, "shared memory": 49152, "grid": [8, 8, 16],
                         "block": [128, 1, 1], "est. achieved occupancy %": 13}  # fmt: skip
            events.append(_x(cat, name, start, dur, GPU, stream, args))
            events.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": launch,
                           "cat": "ac2g", "name": "ac2g"})  # fmt: skip
            events.append({"ph": "f", "id": corr, "pid": GPU, "tid": stream, "ts": start,
                           "cat": "ac2g", "name": "ac2g", "bp": "e"})  # fmt: skip
            gpu_free[stream] = start + dur
            t = op_start + op_dur + rng.uniform(0.5, 3)
        events.append(_x("user_annotation", "attn_fwd", fwd_start, t - fwd_start, PID, TID, {}))
        events.append(_x("user_annotation", f"ProfilerStep#{step}", step_start, t - step_start + 1,
                         PID, TID, {}))  # fmt: skip
        t += 5
    return {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms",
            "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}]}  # fmt: skip


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3),
            "dur": round(dur, 3), "args": args}  # fmt: skip


def write(n_events: int, path: Path, seed: int = 0) -> Path:
    data = msgspec.json.encode(generate(n_events, seed))
    path.write_bytes(gzip.compress(data, 6) if path.suffix == ".gz" else data)
    return path


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    print(write(a.events, a.out))
