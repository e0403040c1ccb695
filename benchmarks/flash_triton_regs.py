"""Registers and spills of the backward kernels per tile, compiled for sm_90 with no GPU.

    python benchmarks/flash_triton_regs.py [--head-dim 128] [--grouped] [--clamp] [--atomic-dq]

Why: a tile that spills registers runs 1.5-4x slower (docs/flash-triton-notes.md), and a GPU
call is scarce; this compiles each candidate of benchmarks/flash_triton_ab_tiles.py offline
(`triton.compile` for `GPUTarget("cuda", 90, 128)`, the signature the JIT would specialise:
pointers and strides 16-divisible, the last dimension's stride 1) and reads what ptxas says
(`cuobjdump -res-usage` on the cubin: REG, and STACK for the spill). It is this machine's
Triton, which may not be the GPU machine's: a pre-selection, not a measurement.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from benchmarks.bench_flash_triton_shapes import load  # noqa: E402
from benchmarks.flash_triton_ab_tiles import DKDV_TILES, DQ_TILES  # noqa: E402

FLOATS = {"softmax_scale"}
FP32_POINTERS = {"Lse", "Delta", "DQAcc"}


def signature(fn: triton.JITFunction, constexprs: dict[str, object]) -> tuple[dict, dict]:
    """(signature, attrs) as the JIT would build them for bf16 [B, S, H, D] inputs."""
    sig, attrs = {}, {}
    for index, name in enumerate(fn.arg_names):
        if name in constexprs:
            sig[name] = "constexpr"
        elif name[:1].isupper():
            sig[name] = "*fp32" if name in FP32_POINTERS else "*bf16"
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif name in FLOATS:
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
            if name.startswith("stride_"):
                attrs[(index,)] = [["tt.divisibility", 16]]
    return sig, attrs


def usage(fn: triton.JITFunction, constexprs: dict, warps: int, stages: int) -> str:
    """'REG n, STACK m' of one compile, or the compiler's complaint."""
    # constexprs left at their defaults, given explicitly: Triton 3.6 (the GPU machine's) would
    # otherwise take them for runtime arguments
    defaults = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
    constexprs = defaults | constexprs
    sig, attrs = signature(fn, constexprs)
    source = ASTSource(fn, sig, constexprs, attrs)
    try:
        kernel = triton.compile(
            source, target=GPUTarget("cuda", 90, 128),
            options={"num_warps": warps, "num_stages": stages},
        )  # fmt: skip
    except Exception as e:  # a tile that does not fit (shared memory, a refused pass)
        return f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
    cuobjdump = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        said = subprocess.run(
            [str(cuobjdump), "-res-usage", cubin.name], capture_output=True, text=True
        ).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", said)
    return f"REG {found[1]}, STACK {found[2]}" if found else said.strip()[:80]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--grouped", action="store_true", help="dK/dV with GQA (GROUPED)")
    parser.add_argument("--clamp", action="store_true",
                        help="each pointer dK/dV tile also with CLAMP_ROWS (step 13)")  # fmt: skip
    parser.add_argument("--atomic-dq", action="store_true",
                        help="each pointer dK/dV tile also adding dQ: by scalar atomics (step 8) "
                             "and by TMA reductions (step 14)")  # fmt: skip
    args = parser.parse_args()
    os.environ.pop("TRITON_INTERPRET", None)
    fa = load(REPO / "attention" / "flash_triton" / "build" / "torch-universal", "_fa_regs")
    base = {"HEAD_DIM": args.head_dim, "CAUSAL": True, "UPCAST_DOT": False, "WINDOW": False}
    plain_strides = {"stride_qd": 1, "stride_kd": 1, "stride_vd": 1, "stride_dod": 1,
                     "stride_gd": 1}  # fmt: skip
    gqa = ", GQA" if args.grouped else ""
    print(f"Triton {triton.__version__}, sm_90, head_dim {args.head_dim}, causal bf16{gqa}")
    print("| kernel | tile | registers, stack (spill) |\n|---|---|---|")
    for kernel, tiles in (("dkdv", DKDV_TILES), ("dq", DQ_TILES)):
        for tile in tiles:
            bm, bn, warps, stages, *tma = tile
            tma = bool(tma and tma[0])
            if kernel == "dkdv":
                fn = fa.flash_bwd_tma._flash_bwd_dkdv_tma if tma else fa.flash_bwd._flash_bwd_dkdv
                extra = {"GROUPED": args.grouped}
            else:
                fn = fa.flash_bwd_tma._flash_bwd_dq_tma if tma else fa.flash_bwd._flash_bwd_dq
                extra = {}
            constexprs = {**base, **extra, "BLOCK_M": bm, "BLOCK_N": bn}
            if not tma:
                constexprs |= {k: v for k, v in plain_strides.items() if k in fn.arg_names}
            label = f"BM{bm} BN{bn} w{warps} s{stages}{' tma' if tma else ''}"
            print(f"| {kernel} | {label} | {usage(fn, constexprs, warps, stages)} |", flush=True)
            if args.clamp and kernel == "dkdv" and not tma:
                said = usage(fn, constexprs | {"CLAMP_ROWS": True}, warps, stages)
                print(f"| {kernel} | {label} clamp | {said} |", flush=True)
            if args.atomic_dq and kernel == "dkdv" and not tma:
                for how, tma_dq in (("atomic dQ", False), ("TMA-reduced dQ", True)):
                    asked = constexprs | {"ATOMIC_DQ": True, "DQ_TMA": tma_dq}
                    print(f"| {kernel} | {label} {how} | {usage(fn, asked, warps, stages)} |")


if __name__ == "__main__":
    main()
