"""Issue 44: the backward of Triton's fused-attention tutorial against ours and cuDNN, one GPU.

Our backward runs ~2,010-2,200 us at B4 H16 S4096 D128 bf16 causal on an H100, cuDNN's ~1,360.
Is the tutorial's (one fused kernel: each program does the dK/dV of a 128-key tile, then the dQ
of a 128-query tile; w4 s5; K pre-scaled by sm_scale*log2(e)) faster, and is it its tiles or
its kernel? Every row times the backward alone, the same call for all (forward once, outside):
`torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)`. Rows: cuDNN bf16 and fp16;
ours bf16 and fp16 at the shipped tiles (default_backward_config, the default route's launch
group); ours fp16 at the tutorial's tiles (both kernels or one, pointer and TMA); the tutorial
in fp16 (it refuses bf16), as shipped and relaunched at 8 warps (its code unchanged; offline
sm_90 compile, Triton 3.9, D128: w4 s5 spills 1,304 B, w8 s5 uses 247 registers, no spill).
dQ, dK, dV are checked first against SDPA fp32 on the same values (see verdict_of). Timing:
bench_flash_triton_ab.time_rows (do_bench medians, L2 flushed, rows interleaved over --rounds).
The tutorial is loaded, not copied (benchmarks/triton_tutorial_fa.py). GPU, `.tutorial` carried:
    PYTHONPATH=$PWD python3 benchmarks/bench_tutorial_backward.py --rounds 3 --out $OUT/tutbwd
CPU check of every row through Triton's interpreter (tiny shapes; SDPA math for cuDNN):
    python3 benchmarks/bench_tutorial_backward.py --smoke
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
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks import bench_triton_tutorial_fa as fwd_bench  # noqa: E402
from benchmarks import triton_tutorial_fa as tut  # noqa: E402
from benchmarks.bench_flash_triton_ab import time_rows  # noqa: E402

# name: (B, H, S, D, causal), as bench_triton_tutorial_fa.SHAPES
SHAPES = {"B4 H16 S4096 D128 causal": (4, 16, 4096, 128, True),
          "B4 H16 S4096 D128 non-causal": (4, 16, 4096, 128, False)}  # fmt: skip
SMOKE_SHAPES = {"B1 H2 S256 D64 causal": (1, 2, 256, 64, True),
                "B1 H2 S256 D64 non-causal": (1, 2, 256, 64, False)}  # fmt: skip
ALL_SHAPES = SHAPES | SMOKE_SHAPES
WARM = (2, 16, 256)  # warm-up B, H, S: B, H > 1 and S % 16 == 0 keep Triton's specialisation
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# The tutorial's Hopper launch (_attention.backward) as our TileConfig (block_m, block_n, warps,
# stages): dK/dV BLOCK_M1 x BLOCK_N1, dQ BLOCK_M2 x BLOCK_N2, NUM_WARPS 4, NUM_STAGES 5.
TUT_DKDV = (32, 128, 4, 5)
TUT_DQ = (128, 32, 4, 5)
TUT_CONFIG = "one kernel: dkdv BM32 BN128, dq BM128 BN32, diagonal in 16-wide slices"
TUT_SHIPPED = {"num_warps": 4, "num_stages": 5}
# label: launch options of the tutorial's _attn_bwd ({}: as shipped)
TUT_ROWS = {"tutorial fp16": {}, "tutorial fp16 w8": {"num_warps": 8},
            "tutorial fp16 w8 s3": {"num_warps": 8, "num_stages": 3}}  # fmt: skip
# label: (dtype, dK/dV tile, dQ tile, TMA); "default" = default_backward_config's tile
OURS_ROWS = {"ours bf16": ("bf16", "default", "default", False),
             "ours fp16": ("fp16", "default", "default", False),
             "ours fp16 @tutorial tiles": ("fp16", "tutorial", "tutorial", False),
             "ours fp16 @tutorial tiles TMA": ("fp16", "tutorial", "tutorial", True),
             "ours fp16 @tutorial dK/dV tile": ("fp16", "tutorial", "default", False),
             "ours fp16 @tutorial dQ tile": ("fp16", "default", "tutorial", False)}  # fmt: skip
TUT_FWD = (128, 64, 4, 2)  # the tutorial forward's one config (not timed; its H100 causal pick)
CHECK_ULPS = 8  # smoke: SDPA math, ours, tutorial within 0.5-2 (fp16 2^-11, bf16 2^-8)
EPS = {"bf16": 2.0**-8, "fp16": 2.0**-11}  # unit roundoff
GRADS = ("dq", "dk", "dv")
CHECKS: dict[tuple[str, str], dict[str, Any]] = {}  # (shape, label) -> config, errors
_REFS: dict[str, tuple[torch.Tensor, ...]] = {}
_PARTS: dict[str, Any] = {}
Spec = tuple[str, str]  # ("sdpa", dtype) | ("ours", OURS_ROWS label) | ("tutorial", TUT_ROWS label)


def label_of(spec: Spec, device: str) -> str:
    kind, what = spec
    sdpa = "cuDNN" if device == "cuda" else "SDPA math"  # the smoke's stand-in on CPU
    return f"{sdpa} {what}" if kind == "sdpa" else what


def parts(path: pathlib.Path) -> tuple[Any, Any]:
    """The tutorial (its forward pinned to one config: no autotuning, it is not timed) and
    our kernels, loaded once per process under bench_triton_tutorial_fa's module names."""
    if not _PARTS:
        mod, fa, sha = fwd_bench.load_parts(path)
        if mod is not None:
            tuner = tut.autotuner(mod)
            same = [c for c in tuner.configs
                    if (*c.kwargs.values(), c.num_warps, c.num_stages) == TUT_FWD]  # fmt: skip
            tuner.configs = same[:1] or tuner.configs[:1]
        _PARTS.update(mod=mod, fa=fa, sha=sha)
    return _PARTS["mod"], _PARTS["fa"]


@dataclass
class Relaunch:
    """Stands in for the tutorial's `_attn_bwd` so that its unchanged backward (which fixes
    num_warps 4, num_stages 5 at the launch) launches it with other options."""

    kernel: Any
    options: dict[str, int]

    def __getitem__(self, grid: Any) -> Callable:
        launch = self.kernel[grid]
        return lambda *args, **kw: launch(*args, **(kw | self.options))


def tutorial_launch(label: str) -> None:
    """Set the tutorial's backward launch for the row `label` (none: as shipped)."""
    mod = _PARTS.get("mod")
    if mod is not None:
        kernel = mod._attn_bwd.kernel if isinstance(mod._attn_bwd, Relaunch) else mod._attn_bwd
        options = TUT_ROWS.get(label, {})
        mod._attn_bwd = Relaunch(kernel, options) if options else kernel


def draw(shape: tuple, device: str) -> list[torch.Tensor]:
    """q, k, v, dout: seeded, bf16 values, [B, H, S, D]. fp16 rows convert these (exactly but
    for fp16's subnormals), so every row and the fp32 reference see the same numbers."""
    b, h, s, d, _ = shape
    gen = torch.Generator(device=device).manual_seed(b * h * s + d)
    return [torch.randn(b, h, s, d, generator=gen, device=device).bfloat16() for _ in range(4)]


def prepared(shape: tuple, dtype: torch.dtype, device: str, seq_major: bool) -> list[torch.Tensor]:
    """draw() in dtype, q, k, v requiring grad; contiguous [B, S, H, D] if seq_major (ours)."""
    xs = [x.to(dtype) for x in draw(shape, device)]
    if seq_major:
        xs = [x.transpose(1, 2).contiguous() for x in xs]
    return [x.requires_grad_(i < 3) for i, x in enumerate(xs)]


def grads_of(out: torch.Tensor, leaves: list[torch.Tensor], dout: torch.Tensor) -> Callable:
    """The timed call, the same for every row: the backward alone through autograd."""
    return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)


def l2_group(fa: Any, shape: tuple, device: str) -> int:
    """Our default route's launch group at the *timed* shape (also for the warm-up's shape)."""
    b, h, s, d, _ = shape
    k = torch.empty(b, s, h, d, dtype=torch.bfloat16, device=device)
    return fa.flash_common.launch_group(k, fa.flash_bwd_config.BACKWARD_L2_GROUP)


def ours_config(fa: Any, label: str, head_dim: int, group: int) -> Any:
    """The row's BackwardConfig: default_backward_config(head_dim, group) (what
    flash_attn_backward runs when given none) with the tutorial's tiles where the row asks."""
    _, dkdv, dq, tma = OURS_ROWS[label]
    default = fa.default_backward_config(head_dim, group)

    def tile(which: str, current: Any, tutorial: tuple) -> Any:
        return current if which == "default" else fa.TileConfig(*tutorial, tma, group)

    return fa.BackwardConfig(tile(dkdv, default.dkdv, TUT_DKDV), tile(dq, default.dq, TUT_DQ))


def build(spec: Spec, shape: tuple, device: str, group: int) -> tuple[Callable, bool, str]:
    """(timed call, whether its gradients are [B, S, H, D], config said in the table)."""
    (kind, what), mod, fa = spec, _PARTS["mod"], _PARTS["fa"]
    causal, scale = shape[4], shape[3] ** -0.5
    if kind == "sdpa":
        q, k, v, dout = prepared(shape, DTYPES[what], device, False)
        backend = SDPBackend.CUDNN_ATTENTION if device == "cuda" else SDPBackend.MATH
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return grads_of(out, [q, k, v], dout), False, ""
    if kind == "ours":  # forward at a fixed pointer launch (not timed: no autotuning)
        q, k, v, dout = prepared(shape, DTYPES[OURS_ROWS[what][0]], device, True)
        config = ours_config(fa, what, shape[3], group)
        out = fa.flash_attn_func_with_config(
            q, k, v, causal=causal, tma=False, l2_group=0, backward_config=config
        )
        return grads_of(out, [q, k, v], dout), True, config.short()
    q, k, v, dout = prepared(shape, torch.float16, device, False)
    out = mod.attention(q, k, v, causal, scale, False)  # host descriptors on Hopper
    tutorial_launch(what)
    said = TUT_CONFIG + "; w{num_warps} s{num_stages}".format(**TUT_SHIPPED | TUT_ROWS[what])
    return grads_of(out, [q, k, v], dout), False, said


def reference(name: str, device: str) -> tuple[torch.Tensor, ...]:
    """dQ, dK, dV of SDPA's math backend in fp32 (no TF32 unless asked) on draw()'s values,
    [B, H, S, D], once per shape (~20 GB at the timed shapes, freed before timing)."""
    if name not in _REFS:
        q, k, v, dout = (x.float() for x in draw(ALL_SHAPES[name], device))
        leaves = [x.requires_grad_() for x in (q, k, v)]
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(*leaves, is_causal=ALL_SHAPES[name][4])
        _REFS[name] = torch.autograd.grad(out, leaves, dout)
    return _REFS[name]


def check(name: str, label: str, got: tuple, seq_major: bool, config: str, device: str) -> None:
    """Record and print the row's max abs error per gradient against SDPA fp32."""
    row: dict[str, Any] = {"config": config, "dtype": "bf16" if "bf16" in label else "fp16"}
    for g, r, n in zip(got, reference(name, device), GRADS, strict=True):
        g = g.transpose(1, 2) if seq_major else g
        row[n], row[f"|{n}| max"] = (g.float() - r).abs().max().item(), r.abs().max().item()
    CHECKS[(name, label)] = row
    said = ", ".join(f"{n} {row[n]:.2e} (|ref| max {row[f'|{n}| max']:.2f})" for n in GRADS)
    print(f"{name} / {label}: max abs err vs SDPA fp32 {said}", flush=True)


def verdict_of(name: str, label: str) -> str:
    """'ok' when every gradient's max error is within CHECK_ULPS x EPS[dtype] x its largest
    reference value (a wrong mask errs by the gradient's own size); '' for a row not checked."""
    row = CHECKS.get((name, label))
    if row is None:
        return ""
    tol = CHECK_ULPS * EPS[row["dtype"]]
    bad = [f"{n} {row[n] / row[f'|{n}| max'] / EPS[row['dtype']]:.0f} eps" for n in GRADS
           if row[n] > tol * row[f"|{n}| max"]]  # fmt: skip
    return "ok" if not bad else "TOO FAR: " + ", ".join(bad)


def timed_row(name: str, spec: Spec, device: str, group: int) -> tuple:
    """time_rows' (workload, label, setup, make): make builds the row, checks it, returns it."""
    label = label_of(spec, device)

    def make() -> Callable:
        fn, seq_major, config = build(spec, ALL_SHAPES[name], device, group)
        check(name, label, fn(), seq_major, config, device)
        return fn

    return (name, label, lambda: tutorial_launch(label), make)


def specs(mod: Any, fa: Any) -> list[Spec]:
    """The rows of one shape, less those whose part did not load."""
    rows: list[Spec] = [("sdpa", "bf16"), ("sdpa", "fp16")]
    rows += [("ours", label) for label in OURS_ROWS] if fa is not None else []
    return rows + [("tutorial", label) for label in TUT_ROWS] if mod is not None else rows


def warm_task(task: tuple) -> str:
    """Worker: one row at the warm-up shape (fills Triton's disk cache for the main process)."""
    name, spec, path, group = task
    parts(pathlib.Path(path))
    small = (*WARM, *ALL_SHAPES[name][3:])
    try:
        build(spec, small, "cuda", group)[0]()
        torch.cuda.synchronize()
        return f"warm-up {name} / {label_of(spec, 'cuda')}: compiled"
    except Exception as e:  # said; the main process tries again (and says it again)
        return f"warm-up {name} / {spec}: {type(e).__name__}: {str(e)[:160]}"


def warm(tasks: list[tuple], workers: int, limit_s: float) -> set[tuple]:
    """Compile in worker processes. Returns the (shape, spec) of tasks left unfinished when a
    worker died (a compile that kills a worker would kill the main process): not timed."""
    unfinished: set[tuple] = set()
    deadline = time.perf_counter() + limit_s
    with mp.get_context("spawn").Pool(workers) as pool:
        procs = list(pool._pool)  # read only: a dead worker's exitcode tells a crash from slow
        jobs = [(t, pool.apply_async(warm_task, (t,))) for t in tasks]
        for task, job in jobs:
            try:
                print(job.get(timeout=max(1.0, deadline - time.perf_counter())), flush=True)
            except Exception as e:  # timeout: said
                print(f"warm-up {task[:2]}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                unfinished.add(task[:2])
        dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
    if dead:
        print(f"warm-up workers died (exit codes {dead}): unfinished rows left out", flush=True)
        return unfinished
    return set()


def table(rows: list[dict[str, Any]], prefix: str) -> str:
    """Markdown: us, TFLOP/s (backward = 2.5 x forward FLOPs), ratios to the SDPA rows, errors."""
    us = {(r["workload"], r["impl"]): r["us"] for r in rows}
    lines = [f"| shape | impl | us (median) | rounds | TFLOP/s | x {prefix} bf16 | x {prefix} fp16 "
             "| max abs err dQ / dK / dV vs SDPA fp32 | check | config |",
             "|---|---|---:|---|---:|---:|---:|---|---|---|"]  # fmt: skip
    for r in rows:
        name, impl = r["workload"], r["impl"]
        info = CHECKS.get((name, impl), {})
        tflops = 2.5 * fwd_bench.flops(ALL_SHAPES[name]) / r["us"] / 1e6
        cells = [name, impl, f"{r['us']:.1f}", " / ".join(f"{x:.1f}" for x in r["us rounds"]),
                 f"{tflops:.0f}"]  # fmt: skip
        for dtype in DTYPES:
            base = us.get((name, f"{prefix} {dtype}"))
            cells.append(f"{r['us'] / base:.3f}" if base else "")
        cells.append(" / ".join(f"{info[n]:.1e}" for n in GRADS) if info else "not checked")
        cells += [verdict_of(name, impl), info.get("config", "")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]], prefix: str) -> list[str]:
    """Per shape: each against cuDNN (same dtype), the tiles' effect (ours at the tutorial's
    tiles / ours) and the kernel's (the tutorial / ours at its tiles, best launch of each)."""
    lines = []
    for name in dict.fromkeys(r["workload"] for r in rows):
        us = {r["impl"]: r["us"] for r in rows if r["workload"] == name}

        def ratio(a: str, b: str, us: dict[str, float] = us) -> str:
            return f"{us[a] / us[b]:.3f}" if a in us and b in us else "n/a"

        tile = min((k for k in us if "@tutorial tiles" in k), key=us.__getitem__, default="")
        best = min((k for k in us if k in TUT_ROWS), key=us.__getitem__, default="")
        f16, b16 = f"{prefix} fp16", f"{prefix} bf16"
        lines.append(
            f"{name}: x {prefix} (same dtype): tutorial {ratio('tutorial fp16', f16)}, best "
            f"tutorial ({best}) {ratio(best, f16)}, ours fp16 {ratio('ours fp16', f16)}, ours "
            f"bf16 {ratio('ours bf16', b16)}; tiles: {tile} / ours fp16 {ratio(tile, 'ours fp16')}"
            f"; kernel: {best} / {tile} {ratio(best, tile)}, / ours fp16 {ratio(best, 'ours fp16')}"
        )
    return lines


def report(rows: list[dict[str, Any]], head: str, prefix: str, out: str | None) -> None:
    """Print the table and summary; with out, write tutorial_bwd.md and tutorial_bwd.json."""
    text = "\n".join([head, "", table(rows, prefix), "", *summary(rows, prefix)])
    print(text, flush=True)
    if out:
        path = pathlib.Path(out)
        path.mkdir(parents=True, exist_ok=True)
        (path / "tutorial_bwd.md").write_text(text + "\n")
        checks = {f"{k[0]} | {k[1]}": v | {"check": verdict_of(*k)} for k, v in CHECKS.items()}
        result = {"head": head, "tutorial sha256": _PARTS.get("sha", ""), "rows": rows,
                  "checks": checks, "tutorial tiles": {"dkdv": TUT_DKDV, "dq": TUT_DQ}}  # fmt: skip
        (path / "tutorial_bwd.json").write_text(json.dumps(result, indent=1))


def run_gpu(args: argparse.Namespace) -> None:
    import triton

    t0 = time.perf_counter()
    path = pathlib.Path(args.tutorial)
    mod, fa = parts(path)
    groups = {n: l2_group(fa, s, "cuda") if fa else 0 for n, s in SHAPES.items()}
    print(f"our backward's launch group per shape: {groups}", flush=True)
    skip: set[tuple] = set()
    if args.workers > 0:
        tasks = [(n, sp, str(path), groups[n]) for n in SHAPES for sp in specs(mod, fa)]
        skip = warm([t for t in tasks if t[1][0] != "sdpa"], args.workers, args.warm_limit_s)
    print(f"warm-up done at {time.perf_counter() - t0:.0f} s", flush=True)
    chosen = [timed_row(n, sp, "cuda", groups[n]) for n in SHAPES for sp in specs(mod, fa)
              if (n, sp) not in skip]  # fmt: skip
    rows = time_rows({}, args.rounds, chosen=chosen)
    head = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton "
            f"{triton.__version__}; tutorial {tut.SOURCE}, sha256 {_PARTS['sha'][:16]}; "
            f"backward alone, {args.rounds} rounds; {time.perf_counter() - t0:.0f} s")  # fmt: skip
    report(rows, head, "cuDNN", args.out)


def smoke_child(path: pathlib.Path, out: str | None) -> int:
    """TRITON_INTERPRET=1, CPU: every row built, run and checked at the smoke shapes; one
    wall-clock call each (not a timing) goes through the report, so it is exercised too."""
    tut.install_cpu_driver()
    mod, fa = parts(path)
    rows, failed = [], [] if mod is not None and fa is not None else ["a part did not load"]
    for name in SMOKE_SHAPES:
        for spec in specs(mod, fa):
            _, label, setup, make = timed_row(name, spec, "cpu", 0)
            try:
                setup()
                fn = make()
                t = time.perf_counter()
                fn()
                us = (time.perf_counter() - t) * 1e6
                rows.append({"workload": name, "impl": label, "us": us, "us rounds": [us]})
            except Exception as e:  # said and counted
                failed.append(f"{name} / {label}: {type(e).__name__}: {e}")
    report(rows, "smoke: Triton interpreter on CPU; times are not timings", "SDPA math", out)
    failed += [f"{k}: {verdict_of(*k)}" for k in CHECKS if verdict_of(*k) not in ("ok", "")]
    print("\n".join(["smoke failures:", *failed]) if failed else "smoke: every row ok")
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tutorial", default=str(tut.DEFAULT), help="the tutorial file")
    parser.add_argument("--out", help="directory for tutorial_bwd.md and tutorial_bwd.json")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=min(12, max(1, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--warm-limit-s", type=float, default=120.0)
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter check, tiny")
    parser.add_argument("--smoke-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke_child:
        sys.exit(smoke_child(pathlib.Path(args.tutorial), args.out))
    if args.smoke:  # the interpreter must be on before triton is imported: a child process
        env = os.environ | {"TRITON_INTERPRET": "1", "PYTEST_VERSION": "smoke"}
        argv = [sys.executable, __file__, "--smoke-child", "--tutorial", args.tutorial]
        argv += ["--out", args.out] if args.out else []
        sys.exit(subprocess.run(argv, env=env, check=False).returncode)
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: run --smoke on CPU, the timings on the GPU machine")
    run_gpu(args)


if __name__ == "__main__":
    main()
