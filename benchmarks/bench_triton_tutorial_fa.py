"""Issue 44: Triton's own fused-attention tutorial against our forward and cuDNN, one GPU.

Question: is the tutorial's forward (benchmarks/triton_tutorial_fa.py says which file and why
it is loaded, not copied) closer to cuDNN than ours? If so its structure is what to adopt;
if not, Triton is the limit on Hopper. Run from the repository root on the GPU machine, with
the tutorial at .tutorial/06-fused-attention.py (carry `.tutorial`; it is git-ignored):
    PYTHONPATH=$PWD python3 benchmarks/bench_triton_tutorial_fa.py --out $OUT/tut
CPU check of the loaded tutorial under Triton's interpreter (tiny shapes, ~15 s):
    python3 benchmarks/bench_triton_tutorial_fa.py --smoke

1. Warm-up: worker processes compile every autotune config of the tutorial (and ours) at
   S=256 into Triton's disk cache, so the main process's autotuning times, not compiles.
2. First call of each row: autotune at the shape (the tutorial's cache is cleared per row:
   its key has no `causal`, so causal and non-causal would share a choice), print the config,
   and the max abs error against SDPA in fp32 on the same inputs.
3. Timings: bench_flash_triton_ab.time_rows (do_bench medians, L2 flushed, rows interleaved
   over --rounds rounds). FLOPs 4·B·H·S²·D, half when causal. The tutorial is fp16-only; cuDNN
   is timed in both dtypes (same tensor-core rate on Hopper), ours in bf16 as shipped.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks import triton_tutorial_fa as tut  # noqa: E402
from benchmarks.bench_flash_triton_ab import inputs, time_rows  # noqa: E402
from benchmarks.bench_flash_triton_shapes import load as load_ours  # noqa: E402

OURS_BUILD = REPO / "attention" / "flash_triton" / "build" / "torch-universal"
# Module names, the same in the workers and the main process (Triton names a kernel by its
# module and qualname), so nothing in a cache key differs from what the workers compiled.
OURS, TUTORIAL = "_fa_ours", "_triton_tutorial_fa"
# name: (B, H, S, D, causal)
SHAPES = {
    "B4 H16 S4096 D128 causal": (4, 16, 4096, 128, True),
    "B4 H16 S4096 D128 non-causal": (4, 16, 4096, 128, False),
    "B4 H16 S1024 D64 causal": (4, 16, 1024, 64, True),
}
WARP_SPEC = (False, True)  # the tutorial's Hopper switch: host descriptors / device + WS
WARM_S = 256  # warm-up sequence length (≥ every BLOCK_M; ints keep their %16 specialisation)
SMOKE_TOL = 1e-2  # fp16 output against fp32 SDPA; the interpreter read ~1e-3, a wrong one ~1
CHECKS: dict[tuple[str, str], dict[str, Any]] = {}  # (shape, impl) -> config, max abs err
_REFS: dict[str, torch.Tensor] = {}


def ab_shape(shape: tuple) -> tuple:
    """The A/B harness's shape tuple, so its seeded inputs() draws the same q, k, v."""
    b, h, s, d, _ = shape
    return (b, h, h, s, s, d, (-1, -1), "fwd")


def flops(shape: tuple) -> float:
    b, h, s, d, causal = shape
    return 4 * b * h * s * s * d * (0.5 if causal else 1.0)


def head_major(shape: tuple, dtype: torch.dtype) -> list[torch.Tensor]:
    """inputs() ([B, S, H, D] bf16, seeded) as contiguous [B, H, S, D] in dtype."""
    return [x.transpose(1, 2).contiguous().to(dtype) for x in inputs(ab_shape(shape))]


def reference(name: str) -> torch.Tensor:
    """SDPA in fp32 on the shape's inputs, [B, S, H, D] (computed once per shape)."""
    if name not in _REFS:
        q, k, v = head_major(SHAPES[name], torch.float32)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=SHAPES[name][4])
        _REFS[name] = out.transpose(1, 2)
    return _REFS[name]


def check(name: str, label: str, out: torch.Tensor, config: str) -> None:
    """Record the row's config and its max abs error against SDPA fp32 (out: [B, S, H, D])."""
    row: dict[str, Any] = {"config": config}
    try:
        row["max abs err"] = (out.float() - reference(name)).abs().max().item()
    except Exception as e:  # the reference failed: said, the row is still timed
        row["max abs err"] = f"{type(e).__name__}: {str(e)[:120]}"
    CHECKS[(name, label)] = row
    print(f"{name} / {label}: config {config or '-'}, max abs err {row['max abs err']}")


def cudnn_row(name: str, dtype: torch.dtype, label: str) -> tuple:
    """SDPA's cuDNN backend; the bf16 row is labelled "cuDNN" (time_rows' reference)."""
    causal = SHAPES[name][4]

    def make() -> Callable:
        q, k, v = head_major(SHAPES[name], dtype)

        def run() -> torch.Tensor:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return out if label == "cuDNN" else out.transpose(1, 2)

        out = run()
        check(name, label, out.transpose(1, 2) if label == "cuDNN" else out, "")
        return run

    return (name, label, lambda: None, make)


def ours_row(fa: Any, name: str) -> tuple:
    """Our forward as shipped (autotuned), called as the A/B harness calls it."""
    causal = SHAPES[name][4]

    def make() -> Callable:
        q, k, v = inputs(ab_shape(SHAPES[name]))

        def run() -> torch.Tensor:
            return fa.flash_attn_func(q, k, v, causal=causal)

        check(name, "ours bf16", run(), fa.last_autotune_choice() or "")
        return run

    return (name, "ours bf16", lambda: None, make)


class TutorialRow:
    """One tutorial row: autotuned at its own shape on its first call, then that choice is
    put back into the autotuner's cache before each timing (setup)."""

    def __init__(self, mod: Any, name: str, warp_specialize: bool) -> None:
        self.mod, self.name, self.ws = mod, name, warp_specialize
        self.label = "tutorial fp16" + (" warp-spec" if warp_specialize else "")
        self.saved: dict | None = None

    def setup(self) -> None:
        cache = tut.autotuner(self.mod).cache
        cache.clear()
        if self.saved is not None:
            cache.update(self.saved)

    def make(self) -> Callable:
        q, k, v = head_major(SHAPES[self.name], torch.float16)
        causal = SHAPES[self.name][4]

        def run() -> torch.Tensor:
            return tut.forward(self.mod, q, k, v, causal, self.ws).transpose(1, 2)

        out = run()
        self.saved = dict(tut.autotuner(self.mod).cache)
        check(self.name, self.label, out, tut.picked(self.mod))
        return run

    def row(self) -> tuple:
        return (self.name, self.label, self.setup, self.make)


def warm_task(task: tuple, path: str) -> str:
    """Worker: compile the task's configs (tutorial) or our autotuned forward at S=256."""
    kind, name, ws, indices = task
    _, _, _, d, causal = SHAPES[name]
    small = (2, 16, WARM_S, d, causal)  # Triton specialises ints == 1: B, H must not be 1
    if kind == "ours":
        fa = sys.modules.get(OURS) or load_ours(OURS_BUILD, OURS)
        q, k, v = inputs(ab_shape(small))
        fa.flash_attn_func(q, k, v, causal=causal)
        torch.cuda.synchronize()
        return f"ours {name}: compiled"
    mod = sys.modules.get(TUTORIAL) or tut.load(pathlib.Path(path), TUTORIAL)
    tuner = tut.autotuner(mod)
    every, failed = list(tuner.configs), []
    q, k, v = head_major(small, torch.float16)
    for i in indices:
        tuner.configs = [every[i]]
        try:
            tut.forward(mod, q, k, v, causal, ws)
        except Exception as e:  # e.g. BLOCK_N > HEAD_DIM: the autotuner skips it too
            failed.append(f"{every[i]}: {type(e).__name__}")
        finally:
            tuner.configs = every
    torch.cuda.synchronize()
    return f"tutorial {name} ws={ws}: {len(indices) - len(failed)}/{len(indices)} compiled"


def warm_tasks(mod: Any, workers: int) -> list[tuple]:
    """Every (shape, warp-spec) variant's configs that survive the tutorial's own pruning,
    split into chunks so all workers share them; one task per shape for ours."""
    every = list(tut.autotuner(mod).configs)
    tasks: list[tuple] = []
    for name, (_, _, s, _, causal) in SHAPES.items():
        kept = mod.prune_invalid_configs(every, None, N_CTX=s, STAGE=3 if causal else 1)
        indices = [every.index(c) for c in kept]
        size = max(1, -(-len(indices) * len(SHAPES) * len(WARP_SPEC) // (2 * workers)))
        for ws in WARP_SPEC:
            for i in range(0, len(indices), size):
                tasks.append(("tutorial", name, ws, tuple(indices[i : i + size])))
        tasks.append(("ours", name, None, ()))
    return tasks


def warm(mod: Any, path: pathlib.Path, workers: int, limit_s: float) -> set[tuple]:
    """Run the warm-up. Variants not warmed by the deadline are compiled by the main process
    (slower), unless a worker died: then they are returned, to be left out (a compile that
    kills a worker would kill the main process and every row with it)."""
    unfinished: set[tuple] = set()
    deadline = time.perf_counter() + limit_s
    with mp.get_context("spawn").Pool(workers) as pool:
        procs = list(pool._pool)  # read only: a dead worker's exitcode tells a crash from slow
        jobs = [(t, pool.apply_async(warm_task, (t, str(path)))) for t in warm_tasks(mod, workers)]
        for task, job in jobs:
            try:
                print(job.get(timeout=max(1.0, deadline - time.perf_counter())), flush=True)
            except Exception as e:  # timeout, or an exception in the worker: said
                print(f"warm-up {task[:3]}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                unfinished.add((task[1], task[2]))
        dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
    if dead:
        print(f"warm-up workers died (exit codes {dead}): unfinished variants left out")
        return unfinished
    return set()


def build_rows(mod: Any, fa: Any, skip: set[tuple]) -> list[tuple]:
    """Every timed row; a row whose part failed to load or warm up is said and left out."""
    rows: list[tuple] = []
    for name in SHAPES:
        rows.append(cudnn_row(name, torch.bfloat16, "cuDNN"))
        rows.append(cudnn_row(name, torch.float16, "cuDNN fp16"))
        if fa is not None:
            rows.append(ours_row(fa, name))
        for ws in WARP_SPEC if mod is not None else ():
            if (name, ws) in skip:
                print(f"{name} / tutorial ws={ws}: not timed (a warm-up worker died)")
                continue
            rows.append(TutorialRow(mod, name, ws).row())
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: µs, TFLOP/s, ratio to cuDNN (bf16 and fp16), errors, config per row."""
    us = {(r["workload"], r["impl"]): r["us"] for r in rows}
    lines = ["| shape | impl | µs (median) | rounds | TFLOP/s | × cuDNN bf16 | × cuDNN fp16 "
             "| max abs err vs SDPA fp32 | rel err vs cuDNN | config |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for r in rows:
        name, impl = r["workload"], r["impl"]
        info = CHECKS.get((name, impl), {})
        err = info.get("max abs err", "")
        cells = [name, impl, f"{r['us']:.1f}", " / ".join(f"{x:.1f}" for x in r["us rounds"]),
                 f"{flops(SHAPES[name]) / r['us'] / 1e6:.0f}"]  # fmt: skip
        for ref in ("cuDNN", "cuDNN fp16"):
            base = us.get((name, ref))
            cells.append(f"{r['us'] / base:.3f}" if base else "")
        cells.append(f"{err:.2e}" if isinstance(err, float) else str(err))
        cells.append(f"{r['err vs cuDNN']:.1e}" if "err vs cuDNN" in r else "")
        cells.append(info.get("config", ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """Per shape: the best tutorial row and ours, each as a multiple of cuDNN bf16."""
    lines = []
    for name in SHAPES:
        got = {r["impl"]: r["us"] for r in rows if r["workload"] == name}
        base, ours = got.get("cuDNN"), got.get("ours bf16")
        tuts = {k: v for k, v in got.items() if k.startswith("tutorial")}
        if not base or not tuts:
            lines.append(f"{name}: no cuDNN or no tutorial row timed")
            continue
        best = min(tuts, key=tuts.__getitem__)
        mine = f"{ours / base:.3f}×" if ours else "not timed"
        lines.append(f"{name}: {best} {tuts[best] / base:.3f}× cuDNN, ours {mine}")
    return lines


def load_parts(path: pathlib.Path) -> tuple[Any, Any, str]:
    """The tutorial and our kernels; a part that fails to load is said and left out."""
    mod = fa = None
    sha = ""
    try:
        sha = tut.check_file(path)
        mod = tut.load(path, TUTORIAL)
    except Exception as e:
        print(f"tutorial not loaded from {path}: {type(e).__name__}: {e}", flush=True)
    try:
        fa = load_ours(OURS_BUILD, OURS)
    except Exception as e:
        print(f"our forward not loaded: {type(e).__name__}: {e}", flush=True)
    return mod, fa, sha


def run_gpu(args: argparse.Namespace) -> None:
    import triton

    t0 = time.perf_counter()
    path = pathlib.Path(args.tutorial)
    mod, fa, sha = load_parts(path)
    skip: set[tuple] = set()
    if mod is not None and args.workers > 0:
        skip = warm(mod, path, args.workers, args.warm_limit_s)
    print(f"warm-up done at {time.perf_counter() - t0:.0f} s", flush=True)
    rows = time_rows({}, args.rounds, chosen=build_rows(mod, fa, skip))
    md = table(rows)
    head = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton "
            f"{triton.__version__}; tutorial {tut.SOURCE}, sha256 {sha[:16]}; "
            f"{args.rounds} rounds")  # fmt: skip
    text = "\n".join([head, "", md, "", *verdict(rows)])
    print(text, flush=True)
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tutorial_fa.md").write_text(text + "\n")
        checks = {f"{k[0]} | {k[1]}": v for k, v in CHECKS.items()}
        result = {"head": head, "tutorial sha256": sha, "rows": rows, "checks": checks,
                  "seconds": time.perf_counter() - t0}  # fmt: skip
        (out / "tutorial_fa.json").write_text(json.dumps(result, indent=1))


def smoke_child(path: pathlib.Path) -> int:
    """Under TRITON_INTERPRET=1 on CPU: the tutorial's forward at tiny shapes, through both
    descriptor paths the H100 rows take (host TensorDescriptor; device descriptor + WS loop),
    against SDPA in fp32. PYTEST_VERSION (set by the parent) is the tutorial's own switch to
    one config (BM128 BN64 w4 s2), so the interpreter does not autotune."""
    tut.install_cpu_driver()
    mod = tut.load(path)
    worst = 0.0
    for b, h, s, d in ((1, 2, 256, 64), (1, 1, 128, 128)):
        for causal in (True, False):
            for host in (True, False):
                mod.supports_host_descriptor = lambda host=host: host
                gen = torch.Generator().manual_seed(s + d)
                q, k, v = (torch.randn(b, h, s, d, generator=gen).half() for _ in "qkv")
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                     is_causal=causal)  # fmt: skip
                err = (tut.forward(mod, q, k, v, causal, not host).float() - ref).abs().max()
                worst = max(worst, err.item())
                path_name = "host TensorDescriptor" if host else "device descriptor, WS loop"
                print(f"B{b} H{h} S{s} D{d} causal={causal} {path_name} ({tut.picked(mod)}): "
                      f"max abs err {err.item():.2e}")  # fmt: skip
    print(f"worst {worst:.2e} (tolerance {SMOKE_TOL})")
    return 0 if worst <= SMOKE_TOL else 1


def smoke(path: pathlib.Path) -> int:
    """The interpreter must be on before triton is imported: run the check in a child."""
    tut.check_file(path)
    env = os.environ | {"TRITON_INTERPRET": "1", "PYTEST_VERSION": "smoke"}
    argv = [sys.executable, __file__, "--smoke-child", "--tutorial", str(path)]
    return subprocess.run(argv, env=env, check=False).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tutorial", default=str(tut.DEFAULT), help="the tutorial file")
    parser.add_argument("--out", help="directory for tutorial_fa.md and tutorial_fa.json")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=min(12, max(1, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--warm-limit-s", type=float, default=100.0)
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter check, tiny")
    parser.add_argument("--smoke-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke_child:
        sys.exit(smoke_child(pathlib.Path(args.tutorial)))
    if args.smoke:
        try:
            sys.exit(smoke(pathlib.Path(args.tutorial)))
        except ValueError as e:  # not the tutorial, or not there: said, no traceback
            sys.exit(f"--smoke: {e}")
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: run --smoke on CPU, the timings on the GPU machine")
    run_gpu(args)


if __name__ == "__main__":
    main()
