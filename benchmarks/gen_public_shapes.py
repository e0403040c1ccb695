"""Small traces shaped like the public ones issue 31 was found on, for tests/fixtures/shapes/.

    python benchmarks/gen_public_shapes.py [OUT_DIR]     # default: tests/fixtures/shapes

The public traces (HTA's test data: a CUDA-graph training trace, an AMD MI250 trace, an MTIA
trace; A100 and V100 traces) are megabytes; these keep only the shape that broke a figure:

- `shape_cuda-graph.json.gz`: 3 ProfilerSteps on an A100. Each step launches 2 kernels one by
  one (cudaLaunchKernel) and replays a CUDA graph (one cudaGraphLaunch; its 4 kernels and a
  memset all carry that launch's correlation id, as CUPTI writes a replay). In step 3 a second
  replay's 4 kernels carry a correlation id no CPU event has (no launch record in the trace).
- `shape_mi250.json.gz`: ROCm Kineto: an MI250's deviceProperties (computeMajor 9 like an
  H100, warpSize 64, `maxSharedMemoryPerMultiProcessor` where CUDA writes `...Optin`) and
  hipLaunchKernel launches.
- `shape_mtia.json.gz`: MTIA: no deviceProperties, host `mtia_runtime` launches
  (`runFunction - job_prep_and_submit_for_execution`), device `mtia_ccp_events` on a stream.
- `shape_a100.json.gz` / `shape_v100.json.gz`: the same small run, told apart only by their
  deviceProperties.

Deterministic: the same bytes every run (gzip mtime 0).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# apart from tests/fixtures/*.json.gz, which the tests read as our own runs' traces
SHAPES_DIR = ROOT / "tests" / "fixtures" / "shapes"
T0 = 1_000_000.0  # µs
CPU = 100  # the host's pid and tid
STREAM = 7

A100 = {
    "id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42298834944,
    "computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
    "sharedMemPerBlock": 49152, "numSms": 108, "regsPerMultiprocessor": 65536,
    "sharedMemPerBlockOptin": 166912, "sharedMemPerMultiprocessor": 167936,
}  # fmt: skip
V100 = {
    **A100, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16945512448, "computeMajor": 7,
    "numSms": 80, "sharedMemPerBlockOptin": 98304, "sharedMemPerMultiprocessor": 98304,
}  # fmt: skip
MI250 = {
    "id": 0, "name": "AMD Instinct MI250X / MI250", "totalGlobalMem": 68702699520,
    "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 64,
    "sharedMemPerBlock": 65536, "numSms": 104, "maxSharedMemoryPerMultiProcessor": 65536,
}  # fmt: skip


def _x(name: str, cat: str, ts: float, dur: float, pid: Any, tid: Any, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts,
            "dur": dur, "args": args}  # fmt: skip


def _gpu(name: str, cat: str, ts: float, dur: float, corr: int, pid: int = 0) -> dict:
    return _x(name, cat, ts, dur, pid, STREAM, device=pid, context=1, stream=STREAM,
              correlation=corr)  # fmt: skip


def _meta(device_label: str | None, stream_name: str) -> list[dict]:
    out = [
        {"name": "process_name", "ph": "M", "pid": CPU, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "pid": CPU, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "thread_name", "ph": "M", "pid": CPU, "tid": CPU,
         "args": {"name": f"thread {CPU} (python3)"}},
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": STREAM, "args": {"name": stream_name}},
    ]  # fmt: skip
    if device_label:
        out.append({"name": "process_labels", "ph": "M", "pid": 0, "tid": 0,
                    "args": {"labels": device_label}})  # fmt: skip
    return out


def _doc(events: list[dict], props: list[dict] | None, **meta: Any) -> dict:
    doc: dict[str, Any] = {"schemaVersion": 1}
    if props is not None:
        doc["deviceProperties"] = props
    return {**doc, **meta, "traceEvents": events, "displayTimeUnit": "ms"}


def cuda_graph() -> dict:
    """See the module docstring: 3 steps of 1,000 µs, 2 eager kernels and a graph replay each."""
    events = _meta("GPU 0", "stream 7 ")
    corr = 1
    for step in range(3):
        at = step * 1000.0
        events.append(_x(f"ProfilerStep#{step + 1}", "user_annotation", at, 1000.0, CPU, CPU))
        for k in range(2):  # eager launches: one kernel each
            events.append(_x("cudaLaunchKernel", "cuda_runtime", at + 10 + 20 * k, 8.0, CPU, CPU,
                             correlation=corr, cbid=211))  # fmt: skip
            events.append(_gpu(f"eager_kernel_{k}", "kernel", at + 30 + 20 * k, 15.0, corr))
            corr += 1
        events.append(_x("cudaGraphLaunch", "cuda_runtime", at + 100, 40.0, CPU, CPU,
                         correlation=corr, cbid=311))  # fmt: skip
        events.append(_gpu("Memset (Device)", "gpu_memset", at + 150, 1.0, corr))
        for k in range(4):  # the replay: every kernel carries the graph launch's correlation
            events.append(_gpu(f"graph_kernel_{k}", "kernel", at + 160 + 50 * k, 40.0, corr))
        corr += 1
        if step == 2:  # a replay whose launch is not in the trace
            for k in range(4):
                events.append(_gpu(f"graph_kernel_{k}", "kernel", at + 500 + 50 * k, 40.0, 9999))
    return _doc(events, [A100], cuda_runtime_version=12010)


def small_run(props: dict) -> dict:
    events = _meta("GPU 0", "stream 7 ")
    for step in range(2):
        at = step * 500.0
        events.append(_x(f"ProfilerStep#{step + 1}", "user_annotation", at, 500.0, CPU, CPU))
        events.append(_x("aten::mm", "cpu_op", at + 5, 20.0, CPU, CPU))
        events.append(_x("cudaLaunchKernel", "cuda_runtime", at + 10, 6.0, CPU, CPU,
                         correlation=step + 1, cbid=211))  # fmt: skip
        events.append(_gpu("ampere_sgemm_128x64_nn", "kernel", at + 30, 200.0, step + 1))
    return _doc(events, [props], cuda_runtime_version=12010)


def mi250() -> dict:
    events = _meta("GPU 0", "stream 7 ")
    for step in range(2):
        at = step * 500.0
        events.append(_x(f"ProfilerStep#{step + 1}", "user_annotation", at, 500.0, CPU, CPU))
        events.append(_x("hipLaunchKernel", "cuda_runtime", at + 10, 6.0, CPU, CPU,
                         correlation=step + 1))  # fmt: skip
        events.append(_gpu("Cijk_Ailk_Bljk_SB_MT64x64x16", "kernel", at + 30, 200.0, step + 1))
    return _doc(events, [MI250], roctracer_version=4)


def mtia() -> dict:
    events = _meta(None, "Stream 1")
    for step in range(2):
        at = step * 500.0
        events.append(_x(f"ProfilerStep#{step + 1}", "user_annotation", at, 500.0, CPU, CPU))
        events.append(_x("runFunction - job_prep_and_submit_for_execution", "mtia_runtime",
                         at + 10, 6.0, CPU, CPU, correlation=step + 1))  # fmt: skip
        events.append(_gpu("fused_mm_relu", "mtia_ccp_events", at + 30, 200.0, step + 1))
    return _doc(events, None)


SHAPES = {
    "shape_cuda-graph": cuda_graph,
    "shape_mi250": mi250,
    "shape_mtia": mtia,
    "shape_a100": lambda: small_run(A100),
    "shape_v100": lambda: small_run(V100),
}


def write(out: Path) -> list[Path]:
    paths = []
    for name, make in SHAPES.items():
        path = out / f"{name}.json.gz"
        data = json.dumps(make(), indent=None).encode()
        with open(path, "wb") as fh, gzip.GzipFile("", "wb", fileobj=fh, mtime=0) as gz:
            gz.write(data)
        paths.append(path)
    return paths


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else SHAPES_DIR
    for p in write(folder):
        print(p)
