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

Issue 42 asks that the bound hold for traces nobody shaped for it, so the shape varies
(`--shape`, SHAPES): more CPU threads, more streams, `python_function` frames around each
operator (with_stack=True), kernel names kilobytes long (CK's and CUTLASS 3's templates, many
distinct), and all of these at once. benchmarks/speed_variants.py runs each through `analyze`.
"""

from __future__ import annotations

import argparse
import gzip
import random
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PID, FWD_TID, BWD_TID, EXTRA_TID, DEVICE = 2417, 2417, 2431, 2440, 0
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
# A long templated name, as CK and CUTLASS 3 write them (~1.2 KB); `{}` makes many distinct ones
LONG_NAME = (
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3<"
    + "ck::tensor_layout::gemm::RowMajor, ck::tensor_layout::gemm::ColumnMajor, ck::Tuple<>, "
    + "ck::f8_fnuz_t, float, ck::tensor_operation::element_wise::PassThrough, " * 8
    + "(ck::tensor_operation::device::GemmSpecialization){}, 256, 1, 128, 128, 16>, true, "
    "(ck::InMemoryDataOperationEnum)0, 2, (ck::TailNumber)10>(ck::GridwiseGemmMultiD_ABScale_"
    "xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>::Argument)"
)
PYTHON = (
    '{"ph": "X", "cat": "python_function", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, '
    '"dur": %.3f, "args": {"Python parent id": %d, "Python id": %d, "Python thread": 0}}'
)
FRAMES = ("nn.Module: Attention_0", "torch/nn/modules/module.py(1751): _call_impl",
          "model.py(88): forward", "<built-in method matmul of type object at 0x7f3a>")  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """What varies between the generated traces: CPU threads launching work, GPU streams,
    python_function frames around each operator, distinct long kernel names (0: the four
    short ones)."""

    threads: int = 2
    streams: int = 2
    python: bool = False
    long_names: int = 0


SHAPES = {
    "default": Shape(),
    "three-threads": Shape(threads=3),
    "six-streams": Shape(streams=6),
    "python-functions": Shape(python=True),
    "long-names": Shape(long_names=200),
    "all": Shape(threads=3, streams=6, python=True, long_names=200),
}
LABEL = '{"ph": "M", "name": "%s", "pid": %d, "tid": %d, "args": {"%s": "%s"}}'
FLOW = '{"ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f, "cat": "ac2g", "name": "ac2g"%s}'


class _Out:
    """Lines joined by `,\\n`, counted."""

    def __init__(self, out: IO[bytes], shape: Shape) -> None:
        self.out, self.n, self.lines = out, 0, []
        self.shape = shape
        self.streams = tuple(7 + 6 * i for i in range(shape.streams))  # (7, 13) by default
        self.python_ids = 0

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
    if o.shape.python:  # with_stack=True: the Python frames around each operator
        _frames(o, tid, t, dur)
    o.put(SPAN % ("cpu_op", outer, PID, tid, t, dur, _op_args(ext, rows, dims)))
    o.put(SPAN % ("cpu_op", inner, PID, tid, t + 1.0, dur * 0.6, _op_args(ext + 1, rows, dims)))
    at = t + 1.0 + dur * 0.2  # inside the inner op, as torch records it
    o.put(SPAN % ("cuda_runtime", "cudaLaunchKernel", PID, tid, at, dur * 0.3,
                  f'"External id": {ext + 1}, "cbid": 211, "correlation": {corr}'))  # fmt: skip
    stream = o.streams[corr % len(o.streams)]
    begin = max(free[stream], at + rng.uniform(2.0, 8.0))
    if rng.random() < 0.1:
        cat, name, length = "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", rng.uniform(2, 9)
        extra = f'"bytes": {rows * dims * 2}, "memory bandwidth (GB/s)": 3.1'
    else:
        cat, name = "kernel", KERNEL_NAMES[rng.randrange(len(KERNEL_NAMES))]
        if o.shape.long_names:
            name = LONG_NAME.format(rng.randrange(o.shape.long_names))
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


def _frames(o: _Out, tid: int, t: float, dur: float) -> None:
    """Python frames enclosing one operator, outermost first, each inside the one before."""
    parent = 0
    for depth, frame in enumerate(FRAMES):
        o.python_ids += 1
        pad = 1.0 - 0.2 * depth
        o.put(PYTHON % (frame, PID, tid, t - pad, dur + 2 * pad - 0.2, parent, o.python_ids))
        parent = o.python_ids


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
    for extra in range(o.shape.threads - 2):  # more threads launching work (a data loader's)
        other = t + 2.5 + extra
        for _ in range(rng.randint(4, 12)):
            other = _launch(o, rng, EXTRA_TID + extra, other, ids, free)
        back = max(back, other)
    end = max(back, *free.values()) + 1.0
    o.put(SPAN % ("user_annotation", f"ProfilerStep#{number}", PID, FWD_TID, start, end - start,
                  f'"External id": {ids[1] + 6}, "Record function id": 0'))  # fmt: skip
    ids[1] += 7
    return end + 10.0


def write(n_events: int, path: Path, seed: int = 7, shape: Shape = SHAPES["default"]) -> int:
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
        o = _Out(out, shape)
        o.put(LABEL % ("process_labels", DEVICE, 0, "labels", f"GPU {DEVICE}"))
        threads = [(FWD_TID, "python"), (BWD_TID, "autograd")]
        threads += [(EXTRA_TID + i, "worker") for i in range(shape.threads - 2)]
        for tid, label in threads:
            o.put(LABEL % ("thread_name", PID, tid, "name", f"thread {tid} ({label})"))
        t, number, ids = 5_000_000.0, 0, [0, 0]
        free = dict.fromkeys(o.streams, t)
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
    parser.add_argument("--shape", choices=list(SHAPES), default="default")
    args = parser.parse_args()
    print(write(args.events, args.out, args.seed, SHAPES[args.shape]), "events ->", args.out)


if __name__ == "__main__":
    main()
