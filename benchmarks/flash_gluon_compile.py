"""Offline proof for flash_gluon.py / flash_gluon_ws.py: compile for sm_90 with no GPU.

    /work/venv-t36/bin/python benchmarks/flash_gluon_compile.py [--module ws|bwd] [--dump DIR]

Why: the GPU machine has Triton 3.6, whose Gluon API differs from later versions, and GPU
time is scarce. This compiles the kernel at the recommended configs with the running Triton
(`GluonASTSource` + `triton.compile` for `GPUTarget("cuda", 90, 32)`, the JIT's
specialisations: 16-divisible pointers and strides) and prints, per config: registers and
spill (cuobjdump -res-usage, ptxas -v), whether ptxas serialised the wgmmas (its C7514 note:
then no wgmma overlaps anything, whatever the PTX says), the `wgmma.wait_group` counts, and
the overlap evidence: for each commit group, how many `ex2` lie between it and the next wait.
`--module ws` compiles the warp-specialised kernel (flash_gluon_ws.py) instead, and adds each
partition's register cap (its setmaxnreg) and the highest register the SASS uses under it;
`--module bwd` the warp-specialised dK/dV kernel (flash_gluon_bwd.py), reported the same way.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import importlib.util
import pathlib
import re
import subprocess
import sys
import tempfile
import types

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = REPO / "attention" / "flash_triton" / "build" / "torch-universal"
# (block_m, block_n, num_warps, stages, head_dim, causal, store_lse)
CONFIGS = [
    (128, 128, 8, 2, 128, True, False),
    (128, 128, 8, 2, 128, True, True),
    (128, 64, 8, 2, 128, True, False),
    (128, 64, 8, 3, 128, True, False),
    (128, 128, 8, 2, 128, False, False),
    (128, 128, 8, 2, 64, True, True),
    (64, 128, 4, 2, 128, True, False),
]
WS_CONFIGS = [  # flash_gluon_ws: block_m 128 = two consumer warpgroups of 64 rows, 4 warps each
    (128, 128, 4, 2, 128, True, False),
    (128, 128, 4, 2, 128, True, True),
    (128, 128, 4, 3, 128, True, False),
    (128, 64, 4, 2, 128, True, False),
    (128, 64, 4, 4, 128, True, False),
    (128, 128, 4, 2, 128, False, False),
    (128, 128, 4, 2, 64, True, True),
]


def load_module() -> types.ModuleType:
    """flash_gluon as a submodule of the build package, imported by path."""
    spec = importlib.util.spec_from_file_location(
        "_flash_gluon_pkg", BUILD / "__init__.py", submodule_search_locations=[str(BUILD)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["_flash_gluon_pkg"] = package
    spec.loader.exec_module(package)
    return importlib.import_module("_flash_gluon_pkg.flash_gluon")


def load_ws_module() -> types.ModuleType:
    """flash_gluon_ws, imported like load_module's (it imports flash_gluon's helpers)."""
    load_module()
    return importlib.import_module("_flash_gluon_pkg.flash_gluon_ws")


def compile_ws(module: types.ModuleType, config: tuple) -> object:
    """The warp-specialised kernel at one config, its register split and L2 order as run."""
    return compile_kernel(
        module._flash_fwd_ws_kernel, config, L2_GROUP=16,
        CONSUMER_REGS=module.CONSUMER_REGS, PRODUCER_REGS=module.PRODUCER_REGS,
    )  # fmt: skip


BWD_CONFIGS = [  # flash_gluon_bwd: (block_m, stages, head_dim, causal); 128 keys, 2 consumers
    (64, 2, 128, True),
    (64, 3, 128, True),
    (64, 2, 128, False),
    (64, 2, 64, True),
]


def load_bwd_module() -> types.ModuleType:
    """flash_gluon_bwd, imported like load_module's."""
    load_module()
    return importlib.import_module("_flash_gluon_pkg.flash_gluon_bwd")


def compile_bwd(module: types.ModuleType, config: tuple) -> object:
    """The warp-specialised dK/dV kernel at one config, as flash_bwd launches it."""
    bm, stages, head_dim, causal = config
    constexprs = {
        "HEAD_DIM": head_dim, "CAUSAL": causal, "BLOCK_M": bm, "STAGES": stages,
        "L2_GROUP": 8, "CONSUMER_REGS": module.CONSUMER_REGS,
        "PRODUCER_REGS": module.PRODUCER_REGS, "num_warps": 4,
    }  # fmt: skip
    return _compile(module._flash_bwd_dkdv_ws_kernel, constexprs, 4)


def compile_kernel(fn: object, config: tuple, **extra: object) -> object:
    """triton.compile of the kernel for sm_90 at one config (bf16 inputs); extra: further
    constexprs (the warp-specialised kernel's register split)."""
    bm, bn, warps, stages, head_dim, causal, lse = config
    constexprs = {
        "HEAD_DIM": head_dim, "CAUSAL": causal, "BLOCK_M": bm, "BLOCK_N": bn,
        "STAGES": stages, "STORE_LSE": lse, "HEAVY_FIRST": True, "L2_GROUP": 0,
        "num_warps": warps, **extra,
    }  # fmt: skip
    return _compile(fn, constexprs, warps)


def _compile(fn: object, constexprs: dict, warps: int) -> object:
    """triton.compile for sm_90 with the JIT's specialisations (16-divisible pointers and
    strides); pointer arguments are the capitalised ones, Lse and Delta fp32, the rest bf16."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    sig, attrs = {}, {}
    for index, name in enumerate(fn.arg_names):
        if name in constexprs:
            sig[name] = "constexpr"
        elif name[:1].isupper():  # Q, K, V, Out, Lse
            sig[name] = "*fp32" if name in ("Lse", "Delta") else "*bf16"
            attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            sig[name] = "fp32" if name == "softmax_scale" else "i32"
            if name.startswith("stride_"):
                attrs[(index,)] = [["tt.divisibility", 16]]
    source = GluonASTSource(fn, sig, constexprs, attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})


def ptxas_report(ptx: str, bin_dir: pathlib.Path) -> tuple[str, bool]:
    """('N registers, S B spill', serialised?) from ptxas -v on the PTX."""
    said = ""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "k.ptx"
        path.write_text(ptx)
        for ptxas in ("ptxas", "ptxas-blackwell"):  # Triton 3.9's PTX 9.4 needs the newer one
            run = subprocess.run(
                [str(bin_dir / ptxas), "-arch=sm_90a", "-v", str(path), "-o", f"{tmp}/k.cubin"],
                capture_output=True, text=True,
            )  # fmt: skip
            said = run.stderr
            if run.returncode == 0:
                break
    regs = re.search(r"Used (\d+) registers", said)
    spill = re.search(r"(\d+) bytes spill stores", said)
    text = f"{regs[1] if regs else '?'} regs, {spill[1] if spill else '?'} B spill stores"
    return text, "C7514" in said or "serialized" in said


def overlap(ptx: str) -> list[tuple[str, int, int]]:
    """(kind, ex2 count, N) per wgmma commit group, in PTX order: kind Q·Kᵀ (both operands
    in shared memory) or P·V (A from registers); ex2 = the ex2 instructions issued while the
    group was pending, up to the wgmma.wait_group N that retired it (N = groups left in
    flight). ex2 > 0 is a softmax running while that group is on the tensor cores."""
    found, pending, kind = [], [], ""
    for line in ptx.splitlines():
        if "wgmma.mma_async" in line and not kind:
            kind = "P·V" if "}, {" in line else "Q·Kᵀ"
        elif "wgmma.commit_group" in line:
            pending.append([kind, 0])
            kind = ""
        elif "ex2.approx" in line:
            for group in pending:
                group[1] += 1
        elif "wgmma.wait_group" in line:
            left = int(line.split()[-1].rstrip(";"))
            retired, pending = pending[: len(pending) - left], pending[len(pending) - left :]
            found += [(k, ex2, left) for k, ex2 in retired]
    return found


def partition_registers(ptx: str, bin_dir: pathlib.Path) -> dict[int, int]:
    """setmaxnreg cap -> registers the SASS uses while that cap holds (the highest R index
    + 1 in the code after each USETMAXREG, in SASS order): per partition, for a warp-
    specialised kernel (ptxas -v only reports the kernel's .maxnreg)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "k.ptx"
        path.write_text(ptx)
        cubin = f"{tmp}/k.cubin"
        subprocess.run([str(bin_dir / "ptxas"), "-arch=sm_90a", str(path), "-o", cubin],
                       check=True, capture_output=True)  # fmt: skip
        sass = subprocess.run([str(bin_dir / "cuobjdump"), "-sass", cubin],
                              check=True, capture_output=True, text=True).stdout  # fmt: skip
    used: dict[int, int] = {}
    cap = 0
    for line in sass.splitlines():
        found = re.search(r"USETMAXREG\.\w+\.CTAPOOL(?: UP\d,)? (0x[0-9a-f]+)", line)
        if found:
            cap = int(found[1], 16)
            continue
        regs = [int(r) for r in re.findall(r"\bR(\d+)\b", line)]
        if regs and cap:
            used[cap] = max(used.get(cap, 0), max(regs) + 1)
    return dict(sorted(used.items()))


def report(name: str, kernel: object, bin_dir: pathlib.Path, dump: pathlib.Path | None,
           ws: bool) -> None:  # fmt: skip
    """Print one compiled config's registers, spill, shared memory, serialisation, waits."""
    ptx = kernel.asm["ptx"]
    if dump:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / (re.sub(r"\W+", "_", name) + ".ptx")).write_text(ptx)
    usage, serialised = ptxas_report(ptx, bin_dir)
    waits = collections.Counter(re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", ptx))
    groups = overlap(ptx)
    print(
        f"{name}: {usage}, shared {kernel.metadata.shared} B, "
        f"wgmma serialised by ptxas: {'YES' if serialised else 'no'}\n"
        f"    wait_group counts {dict(sorted(waits.items()))}; per group (kind, ex2 while "
        f"pending, N of the wait that retired it): {groups}"
    )
    if ws:
        caps = [int(n) for n in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)]
        print(
            f"    setmaxnreg caps in the PTX {sorted(set(caps))}; registers used under each "
            f"cap (SASS): {partition_registers(ptx, bin_dir)}\n"
            f"    P·V groups with exp2 issued while in flight: "
            f"{[g for g in groups if g[1] and g[0] == 'P·V']}"
        )
    else:
        overlapped = [g for g in groups if g[1] and g[0] == "Q·Kᵀ"]
        print(f"    Q·Kᵀ groups with exp2 issued while in flight: {overlapped}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=pathlib.Path, help="write each config's PTX here")
    parser.add_argument(
        "--module", choices=("gluon", "ws", "bwd"), default="gluon",
        help="flash_gluon (default), the warp-specialised flash_gluon_ws or flash_gluon_bwd",
    )  # fmt: skip
    args = parser.parse_args()
    import triton

    if args.module == "bwd":
        return compile_bwd_configs(args.dump)
    ws = args.module == "ws"
    module = load_ws_module() if ws else load_module()
    print(f"Triton {triton.__version__}; Gluon pieces missing: {module._MISSING or 'none'}")
    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    for config in WS_CONFIGS if ws else CONFIGS:
        name = "BM{} BN{} w{} s{} D{} {} lse={}".format(*config[:5], *config[5:])
        name = name.replace("True", "causal", 1) if config[5] else name.replace("False", "full", 1)
        try:
            if ws:
                kernel = compile_ws(module, config)
            else:
                kernel = compile_kernel(module._flash_fwd_gluon_kernel, config)
        except Exception as e:  # a config that does not compile: say so, go on
            print(f"{name}: FAILED {type(e).__name__}: {str(e).splitlines()[-1][:200]}")
            continue
        report(name, kernel, bin_dir, args.dump, ws)


def compile_bwd_configs(dump: pathlib.Path | None) -> None:
    """--module bwd: each BWD_CONFIGS entry compiled and reported as a warp-specialised one."""
    import triton

    module = load_bwd_module()
    print(f"Triton {triton.__version__}; Gluon pieces missing: {module._MISSING or 'none'}")
    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    for config in BWD_CONFIGS:
        name = "dkdv BM{} s{} D{} {}".format(*config[:3], "causal" if config[3] else "full")
        try:
            kernel = compile_bwd(module, config)
        except Exception as e:  # a config that does not compile: say so, go on
            print(f"{name}: FAILED {type(e).__name__}: {str(e).splitlines()[-1][:300]}")
            continue
        report(name, kernel, bin_dir, dump, True)


if __name__ == "__main__":
    main()
