"""What the float64 reference check and the memory check cost per run (issue #7 overhead).

    python benchmarks/reference_cost.py            # on the H200: the post's shape, bf16

The reference check's cost is its launches (CPU) and its float64 work (GPU, overlapped with the
trace parse): both are timed for the smallest chunk (what every run used before chunks grew
with spare memory) and for the chunk the run now picks. The memory check asks the driver for
free memory once per run (`torch.cuda.mem_get_info`); its cost is timed on its own. Last, the
same check on a strided subset of the (batch, head) pairs: the value it would report and its
cost, to show what checking fewer pairs would save.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from profiling.run.reference import check as reference_check
from profiling.workload.memory import check_memory
from profiling.workload.spec import Workload, resolve_device


def timed(fn, repeats: int = 30) -> tuple[float, float]:
    """Median ms to queue the work (CPU) and to finish it (CPU + GPU)."""
    queue, done = [], []
    for _ in range(repeats + 3):
        began = time.perf_counter()
        finish = fn()
        queued = time.perf_counter()
        finish()
        ended = time.perf_counter()
        queue.append((queued - began) * 1e3)
        done.append((ended - began) * 1e3)
    return statistics.median(queue[3:]), statistics.median(done[3:])


def main() -> None:
    device = resolve_device("auto")
    config = Workload.from_user(variant="sdpa-flash", device=device)
    if device == "cpu":
        config = Workload.from_user(variant="sdpa-flash", device="cpu", batch=2, heads=4,
                                     seq_len=512, dtype="float32")  # fmt: skip
    b, h, s, d = config.batch, config.heads, config.seq_len, config.head_dim
    gen = torch.Generator(device=device).manual_seed(0)
    make = lambda: torch.randn((b, h, s, d), generator=gen, device=device, dtype=config.torch_dtype)  # noqa: E731
    t = {"q": make(), "k": make(), "v": make()}
    t["out"] = torch.nn.functional.scaled_dot_product_attention(t["q"], t["k"], t["v"],
                                                                is_causal=True)  # fmt: skip
    spare = check_memory(config, device)
    print(f"{config.shape_text()} on {device}; spare after the estimate: {spare / 1024**3:.1f} GiB")
    print("| reference chunk | launch (CPU) ms | queued → result ms |")
    print("|---|---|---|")
    for label, room in (("256 MiB (smallest)", 0), ("sized by spare memory (the run's)", spare)):
        check = lambda room=room: reference_check.relative_error(t, config, "bhsd", device, room)  # noqa: E731
        queue, done = timed(check)
        print(f"| {label} | {queue:.2f} | {done:.2f} |")
    # The same check on a strided subset of the (batch, head) pairs: what it would report and cost.
    pairs = b * h
    print("| pairs checked | rel. err | launch (CPU) ms | queued → result ms |")
    print("|---|---|---|---|")
    for step in (1, 2, 4, 8, 16):
        sub = {k: x.reshape(pairs, s, d)[::step].unsqueeze(0) for k, x in t.items()}
        check = lambda sub=sub: reference_check.relative_error(sub, config, "bhsd", device, spare)  # noqa: E731
        err = check()()[0]
        queue, done = timed(check)
        kept = len(sub["q"][0])
        print(f"| {kept} of {pairs} (every {step}) | {err:.4e} | {queue:.2f} | {done:.2f} |")
    calls = []
    for _ in range(200):
        began = time.perf_counter()
        check_memory(config, device)
        calls.append((time.perf_counter() - began) * 1e6)
    print(f"check_memory (driver free-memory query + estimate): {statistics.median(calls):.0f} µs")


if __name__ == "__main__":
    main()
