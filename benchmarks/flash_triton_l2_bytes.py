"""Issue 44, step 9: DRAM bytes and L2 hit rate of our kernels in each launch order, by ncu.

    python3 benchmarks/flash_triton_l2_bytes.py [--groups 0 8] [--out DIR]

Why: the launch-order step claims that walking a few (batch, head) pairs through all their
tiles keeps K/V in L2; the timings say whether it is faster, this says whether the mechanism is
the one claimed. Each (kernel, group) runs in a child under `ncu --clock-control none
--cache-control all` (L2 flushed before the measured launch: every order starts cold), the
second launch of the kernel measured (the first compiles), at B4 H16 S4096 D128 bf16 causal:
the forward (TMA, BM128 BN64 w4 s2, today's autotuner pick) and the backward's two kernels at
their default tiles. K+V of this shape are 2 x 64 x 1 MiB; Q, O, dO, dQ 64 MiB each.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
METRICS = {
    "dram__bytes_read.sum": "DRAM read", "dram__bytes_write.sum": "DRAM written",
    "lts__t_sector_hit_rate.pct": "L2 hit %", "gpu__time_duration.sum": "ncu time",
}  # fmt: skip
UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1e-3, "ns": 1e-3,
         "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3}  # to bytes and µs  # fmt: skip
KERNELS = {
    "forward": "regex:_flash_fwd",
    "dkdv": "regex:_flash_bwd_dkdv",
    "dq": "regex:_flash_bwd_dq",
}


def child(group: int) -> None:
    """Two forwards, then two backwards, in launch order `group` (what ncu measures)."""
    sys.path.insert(0, str(REPO))
    import torch

    from benchmarks.bench_flash_triton_shapes import load

    fa = load(REPO / "attention" / "flash_triton" / "build" / "torch-universal", "_fa_bytes")
    fa.flash_bwd_config.BACKWARD_L2_GROUP = group
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
               for _ in "qkv")  # fmt: skip
    for x in (q, k, v):
        x.requires_grad_(True)
    dout = torch.randn_like(q)
    for _ in range(2):
        out = fa.flash_attn_func_with_config(
            q, k, v, causal=True, block_m=128, block_n=64, num_warps=4, num_stages=2, tma=True,
            l2_group=group,
        )  # fmt: skip
        out.backward(dout)
    torch.cuda.synchronize()


def measured(ncu: str, kernel: str, group: int) -> dict[str, float]:
    """ncu's METRICS for the second launch of `kernel` in a child in launch order `group`."""
    command = [
        ncu, "--clock-control", "none", "--cache-control", "all", "-k", KERNELS[kernel],
        "--launch-skip", "1", "--launch-count", "1", "--metrics", ",".join(METRICS), "--csv",
        sys.executable, __file__, "--child", str(group),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    rows = [line for line in done.stdout.splitlines() if line.startswith('"')]
    if done.returncode or not rows:
        raise RuntimeError(f"ncu exit {done.returncode}: {(done.stdout + done.stderr)[-800:]}")
    figures = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        value = float(row["Metric Value"].replace(",", ""))
        unit = row["Metric Unit"]
        scale = UNITS.get(unit, 1)
        figures[METRICS[row["Metric Name"]]] = value * scale
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[0, 8])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child)
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    results = []
    print("| kernel | group | DRAM read MB | DRAM written MB | L2 hit % | ncu µs |")
    print("|---|---:|---:|---:|---:|---:|", flush=True)
    for kernel in KERNELS:
        for group in args.groups:
            f = measured(ncu, kernel, group)
            results.append({"kernel": kernel, "group": group, **f})
            print(f"| {kernel} | {group} | {f['DRAM read'] / 1e6:.1f} | "
                  f"{f['DRAM written'] / 1e6:.1f} | {f['L2 hit %']:.1f} | {f['ncu time']:.1f} |",
                  flush=True)  # fmt: skip
    pathlib.Path(args.out, "l2_bytes.json").write_text(json.dumps(results, indent=1))
    return None


if __name__ == "__main__":
    main()
