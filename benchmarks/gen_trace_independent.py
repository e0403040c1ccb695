"""A torch.profiler-shaped trace written by code that shares nothing with the project's reader
or its own generators (issue 32): the large-trace targets must hold on traces the project did
not shape for itself.

    python benchmarks/gen_trace_independent.py --events 10000000 --out /tmp/ind_1e7.json.gz

Each event is formatted as text from its own template (no msgspec, no dicts, no
benchmarks/gen_trace*.py), Kineto's spacing (`"ph": "X", "cat": ...`), one event per line:
ProfilerStep#N and an `attn_fwd` record_function per step; nested `cpu_op`s with `Input Dims`
and `Input type` recorded; `cudaLaunchKernel` calls; long templated kernel names (CUTLASS,
at::native) on two streams; memcpys; `ac2g` flow start/finish pairs; a forward thread and an
autograd thread. Deterministic for a seed; a few MB of memory at any size.
"""

from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path
from typing import IO

PID, FWD_TID, BWD_TID, DEVICE, STREAMS = 2417, 2417, 2431, 0, (7, 13)
KERNEL_NAMES = (
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
    "at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
    "at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
    "at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
    "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>"
    "(int, at::native::gpu_kernel_impl_nocast<...>::{lambda(int)#1})",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, "
    "c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, "
    "c10::BFloat16 const*, int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<c10::BFloat16>, "
    "at::detail::Array<char*, 1>)",
)
OPS = (
    ("aten::linear", "aten::addmm"),
    ("aten::matmul", "aten::bmm"),
    ("aten::softmax", "aten::_softmax"),
    ("aten::mul", "aten::empty_strided"),
    ("aten::masked_fill_", "aten::fill_"),
)
SPAN = (
    '{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, "dur": %.3f, '
    '"args": {%s}}'
)
LABEL = '{"ph": "M", "name": "%s", "pid": %d, "tid": %d, "args": {"%s": "%s"}}'
FLOW = '{"ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f, "cat": "ac2g", "name": "ac2g"%s}'


class _Out:
    """Lines joined by `,\\n`, counted."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.n, self.lines = out, 0, []

    def put(self, line: str) -> None:
        self.lines.append(line)
        self.n += 1
        if len(self.lines) >= 4096:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            self.out.write(
                ((",\n" if self.n > len(self.lines) else "\n") + ",\n".join(self.lines)).encode()
            )
            self.lines = []


def _op_args(ext: int, rows: int, dims: int) -> str:
    return (
        f'"External id": {ext}, "Record function id": 0, "Sequence number": {ext // 3}, '
        f'"Fwd thread id": 0, "Input Dims": [[{rows}, {dims}], [{dims}, {dims}], []], '
        '"Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]'
    )


def _launch(o: _Out, rng: random.Random, tid: int, t: float, ids: list[int], free: dict) -> float:
    """An operator, its inner op, the launch, the kernel (or memcpy) and the flow pair."""
    ids[0] += 1
    ids[1] += 2
    corr, ext = ids
    outer, inner = OPS[rng.randrange(len(OPS))]
    dur = rng.uniform(6.0, 30.0)
    rows, dims = rng.choice((512, 1024, 4096)), rng.choice((64, 128))
    o.put(SPAN % ("cpu_op", outer, PID, tid, t, dur, _op_args(ext, rows, dims)))
    o.put(SPAN % ("cpu_op", inner, PID, tid, t + 1.0, dur * 0.6, _op_args(ext + 1, rows, dims)))
    at = t + 1.0 + dur * 0.2  # inside the inner op, as torch records it
    o.put(SPAN % ("cuda_runtime", "cudaLaunchKernel", PID, tid, at, dur * 0.3,
                  f'"External id": {ext + 1}, "cbid": 211, "correlation": {corr}'))  # fmt: skip
    stream = STREAMS[corr % 2]
    begin = max(free[stream], at + rng.uniform(2.0, 8.0))
    if rng.random() < 0.1:
        cat, name, length = "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", rng.uniform(2, 9)
        extra = f'"bytes": {rows * dims * 2}, "memory bandwidth (GB/s)": 3.1'
    else:
        cat, name = "kernel", KERNEL_NAMES[rng.randrange(len(KERNEL_NAMES))]
        length = rng.uniform(5.0, 150.0)
        extra = (
            '"queued": 0, "shared memory": 16384, "registers per thread": 72, '
            f'"blocks per SM": 1.5, "warps per SM": 6.0, "grid": [{rows // 64}, 1, 1], '
            '"block": [128, 1, 1], "est. achieved occupancy %": 25'
        )
    args = f'"External id": {ext + 1}, "device": {DEVICE}, "stream": {stream}, '
    args += f'"correlation": {corr}, {extra}'
    o.put(SPAN % (cat, name, DEVICE, stream, begin, length, args))
    o.put(FLOW % ("s", corr, PID, tid, at, ""))
    o.put(FLOW % ("f", corr, DEVICE, stream, begin, ', "bp": "e"'))
    free[stream] = begin + length
    return t + dur + rng.uniform(1.0, 4.0)


def _step(o: _Out, rng: random.Random, number: int, t: float, ids: list[int], free: dict) -> float:
    start = t
    t += 3.0
    for _ in range(rng.randint(15, 45)):
        t = _launch(o, rng, FWD_TID, t, ids, free)
    o.put(SPAN % ("user_annotation", "attn_fwd", PID, FWD_TID, start + 3.0, t - start - 3.0,
                  f'"External id": {ids[1] + 5}, "Record function id": 0'))  # fmt: skip
    back = t + 2.0
    for _ in range(rng.randint(4, 12)):
        back = _launch(o, rng, BWD_TID, back, ids, free)
    end = max(back, *free.values()) + 1.0
    o.put(SPAN % ("user_annotation", f"ProfilerStep#{number}", PID, FWD_TID, start, end - start,
                  f'"External id": {ids[1] + 6}, "Record function id": 0'))  # fmt: skip
    ids[1] += 7
    return end + 10.0


def write(n_events: int, path: Path, seed: int = 7) -> int:
    """About `n_events` events at `path` (gzip level 1 when it ends in .gz); returns the count."""
    rng = random.Random(seed)
    with open(path, "wb") as raw:
        out: IO[bytes] = (
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) if path.suffix == ".gz" else raw
        )  # type: ignore[assignment]
        out.write(
            b'{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": '
            b'"Independent GPU", "totalGlobalMem": 85031714816, "computeMajor": 8, '
            b'"computeMinor": 0, "numSms": 108}\n  ],\n  "record_shapes": 1,\n'
            b'  "traceEvents": ['
        )
        o = _Out(out)
        o.put(LABEL % ("process_labels", DEVICE, 0, "labels", f"GPU {DEVICE}"))
        for tid, label in ((FWD_TID, "python"), (BWD_TID, "autograd")):
            o.put(LABEL % ("thread_name", PID, tid, "name", f"thread {tid} ({label})"))
        t, number, ids = 5_000_000.0, 0, [0, 0]
        free = dict.fromkeys(STREAMS, t)
        while o.n < n_events:
            number += 1
            t = _step(o, rng, number, t, ids, free)
        o.flush()
        out.write(b'\n],\n  "traceName": "independent.json.gz"\n}\n')
        if out is not raw:
            out.close()
    return o.n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(write(args.events, args.out, args.seed), "events ->", args.out)


if __name__ == "__main__":
    main()
