"""Issue 44's A/B of the TMA forward (flash_tma.py), one GPU call of about two minutes.

    PYTHONUNBUFFERED=1 python3 benchmarks/bench_flash_triton_ab.py --baseline DIR --tma [--patch]

Rows at the S4096 MHA forward, the GQA prefill and the train step: the old shipped forward
(DIR, autotuned), cuDNN, the new code with TMA_FORWARD on (autotuned over flash_tma's list),
and, at the two forward shapes, TMA at fixed tiles (one with warp specialisation) beside the
plain kernel at the same tile (what TMA alone buys). Worker processes compile first (Triton's
disk cache); every TMA launch is checked against float64 before anything is timed, and every
timed row against cuDNN on the same inputs. --patch writes TMA_FORWARD / TMA_WARP_SPEC.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pathlib
import re
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.bench_flash_triton_ab import (
    REPO,
    WORKLOADS,
    cudnn,
    fwd_config,
    impl,
    markdown,
    modules,
    time_rows,
)  # fmt: skip
from benchmarks.flash_triton_ab_checks import cannot_compile, check_case

FWD, GQA, TRAIN = "fwd B4 H16 S4096 D128", "GQA B4 H32/KV8 S4096 D128", "train B4 H16 S4096 D128"
# Fixed TMA launches: (BLOCK_M, BLOCK_N, warps, stages, warp-specialised unmasked loop).
TMA_SWEEP = [(128, 128, 8, 3, False), (128, 64, 8, 3, False), (128, 128, 8, 3, True)]
PLAIN = (128, 128, 8, 3)  # the plain kernel at TMA's first tile: TMA alone, same config
TOL = 2e-2  # bf16 against float64 (measured ~5e-3 on the CPU interpreter)
MARGIN = 0.99  # a candidate must be >= 1% faster: rounds of one row differ by a few %


def tma_flags(fa: Any, tma: bool, warp_spec: bool = False) -> None:
    """The new module's TMA launch defaults (the other candidates stay off)."""
    fa.flash_fwd.OVERLAP_UNMASKED = fa.flash_fwd.PACK_GQA_DEFAULT = False
    fa.flash_fwd.TMA_FORWARD, fa.flash_fwd.TMA_WARP_SPEC = tma, warp_spec


def tma_label(cfg: tuple) -> str:
    return f"TMA {cfg[:4]}{' ws' if cfg[4] else ''}"


def tma_rows(mods: dict[str, Any], scale: int = 1) -> list[tuple[str, str, Callable, Callable]]:
    """(workload, label, setup, fn builder) of every timed row."""
    new, old = mods["new"], mods["old"]
    off, on = (lambda: tma_flags(new, False)), (lambda: tma_flags(new, True))
    rows = []
    for name in (FWD, GQA, TRAIN):
        shape = WORKLOADS[name]
        rows.append((name, "cuDNN", off, lambda s=shape: cudnn(s, scale)))
        rows.append((name, "old", off, lambda s=shape: impl(old, s, scale)))
        rows.append((name, "new, TMA autotuned", on, lambda s=shape: impl(new, s, scale)))
        if name == TRAIN:
            continue
        for cfg in TMA_SWEEP:
            c = fwd_config(*cfg[:4], 0, TMA=True, WARP_SPEC=cfg[4])
            rows.append((name, tma_label(cfg), off, lambda c=c, s=shape: impl(new, s, scale, c)))
        c = fwd_config(*PLAIN, 0, TMA=False)
        rows.append((name, f"plain {PLAIN}", off, lambda c=c, s=shape: impl(new, s, scale, c)))
    return rows


def warm(args: tuple[str, int, int]) -> str:
    """Worker: every nworkers-th row once at small shapes (fills Triton's disk cache)."""
    baseline, index, nworkers = args
    done = []
    for i, (name, label, setup, make) in enumerate(tma_rows(modules(baseline), scale=8)):
        if i % nworkers == index:
            try:
                setup()
                make()()
                done.append(label)
            except Exception as e:  # said here; the main process says it again
                print(f"warm-up {name} / {label}: {type(e).__name__}: {str(e)[:200]}")
    torch.cuda.synchronize()
    return f"worker {index}: {len(done)} rows"


def check(mods: dict[str, Any]) -> tuple[dict[str, float], list[str]]:
    """Every TMA launch against float64: (errors, launches that cannot compile here)."""
    new, errs, skipped = mods["new"], {}, []
    cases = {  # name: (B, H, KV, q_len, kv_len, D, window, config, grad)
        "autotuned train MHA S1000": (2, 4, 4, 1000, 1000, 128, (-1, -1), None, True),
    }
    c = fwd_config(128, 64, 8, 3, 0, TMA=True)  # one tile: the window constexprs compile once
    window = (1, 8, 2, 700, 1000, 128, (100, 0), c, False)
    cases["TMA (128, 64, 8, 3) GQA q700 kv1000 window"] = window
    for cfg in TMA_SWEEP:
        c = fwd_config(*cfg[:4], 0, TMA=True, WARP_SPEC=cfg[4])
        cases[f"{tma_label(cfg)} GQA S1000"] = (1, 8, 2, 1000, 1000, 128, (-1, -1), c, False)
    tma_flags(new, True)
    calls, real = [0], new.flash_fwd.launch_tma

    def counting(*args: Any) -> None:
        calls[0] += 1
        real(*args)

    new.flash_fwd.launch_tma = counting
    try:
        for name, case in cases.items():
            before = calls[0]
            try:
                errs |= check_case(new, name, *case)
            except Exception as e:  # a launch that cannot compile is said, not counted
                print(f"check {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                if cannot_compile(e):
                    skipped.append(name)
                else:
                    errs[name] = float("inf")
                continue
            if calls[0] == before:  # the launch did not reach the TMA kernel: a failure
                errs[f"{name}: TMA kernel not reached"] = float("inf")
    finally:
        new.flash_fwd.launch_tma = real
        tma_flags(new, False)
    return errs, skipped


def decide(rows: list[dict[str, Any]], errs: dict[str, float]) -> dict[str, bool]:
    """TMA_FORWARD: the autotuned TMA forward beats the old one by MARGIN on both forward
    shapes, is not slower on the train step, and every TMA check passed. TMA_WARP_SPEC: on
    top of that, the warp-specialised tile beats the same tile without on both shapes."""
    us = {(r["workload"], r["impl"]): r["us"] for r in rows}
    ok = bool(errs) and all(e < TOL for e in errs.values())
    auto = "new, TMA autotuned"
    fwd_win = all(
        (w, auto) in us and us[(w, auto)] < MARGIN * us[(w, "old")] for w in (FWD, GQA)
    )  # fmt: skip
    train_ok = (TRAIN, auto) in us and us[(TRAIN, auto)] <= us[(TRAIN, "old")] / MARGIN
    tma = ok and fwd_win and train_ok
    ws, plain = tma_label(TMA_SWEEP[2]), tma_label(TMA_SWEEP[0])
    ws_win = all(
        (w, ws) in us and (w, plain) in us and us[(w, ws)] < MARGIN * us[(w, plain)]
        for w in (FWD, GQA)
    )  # fmt: skip
    return {"TMA_FORWARD": tma, "TMA_WARP_SPEC": tma and ws_win}


def patch_flags(values: dict[str, bool]) -> None:
    """Set module-level `NAME = True|False` lines of this checkout's flash_fwd.py."""
    path = REPO / "attention" / "flash_triton" / "build" / "torch-universal" / "flash_fwd.py"
    text = path.read_text()
    for name, value in values.items():
        text, n = re.subn(rf"^{name} = (True|False)", f"{name} = {bool(value)}", text, flags=re.M)
        if n != 1:
            raise RuntimeError(f"flash_fwd.py: no single '{name} = True|False' line to patch")
    path.write_text(text)


def tma_main(baseline: str, rounds: int, write: bool, t0: float) -> None:
    """Warm-up in workers, float64 checks, interleaved timings, decision (and --patch)."""
    workers = 6
    with mp.get_context("spawn").Pool(workers) as pool:
        print("\n".join(pool.map(warm, [(baseline, i, workers) for i in range(workers)])))
    print(f"warm-up {time.perf_counter() - t0:.0f} s", flush=True)
    mods = modules(baseline)
    errs, skipped = check(mods)
    worst = max(errs.values(), default=float("inf"))
    print(f"float64 checks of the TMA launches: {len(errs)}, worst {worst:.2e}", flush=True)
    print(f"cannot compile here (not checked, not counted): {skipped}", flush=True)
    rows = time_rows(mods, rounds, chosen=tma_rows(mods))
    table = markdown(rows)
    print(table, flush=True)
    decision = decide(rows, errs)
    print(f"decision (kept if it won): {decision}", flush=True)
    if write:
        patch_flags(decision)
        print("patched flash_fwd.py", flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "float64 errors": errs, "not compiled": skipped, "rows": rows,
              "decision": decision, "seconds": time.perf_counter() - t0}  # fmt: skip
    if os.environ.get("OUT"):
        out = pathlib.Path(os.environ["OUT"])
        (out / "ab-tma.json").write_text(json.dumps(result, indent=1))
        (out / "ab-tma.md").write_text(table + "\n")
    print(f"{torch.cuda.get_device_name()}; done in {time.perf_counter() - t0:.0f} s")
