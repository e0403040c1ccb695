"""Issue 44, step 6: the tiles on an H100, forward warp specialisation and the backward's tiles.

    PYTHONUNBUFFERED=1 python3 benchmarks/flash_triton_ab_tiles.py [--rounds 3]

Two questions, one call (rows interleaved, `bench_flash_triton_ab.time_rows`):
- Forward: does Triton's warp specialisation of the unmasked loop (a producer warp issuing the
  TMA copies) help the TMA kernel at the 4-warp, 2-stage tiles it now runs at head_dim 128?
  It gained 3% at 8 warps, 3 stages (docs/flash-triton-notes.md); Triton's tutorial gained 7%
  with it at its 4-warp tile. Rows at the S4096 MHA and GQA forwards beside cuDNN and today's
  autotuned default.
- Backward: its tiles were fixed from an H200 survey of six per kernel, none with 4 warps on a
  64-row or 128-key tile. Each kernel's candidates on the H100, the other kernel at its
  default (the backward alone, forward outside the timing), every candidate's gradients
  checked against the default's before it is timed; both kernels' candidates include their
  TMA versions (flash_bwd_tma.py, `tma` in the tile), at the tiles that spilled without it.
- Launch order (step 9, `--part order`): each workload with the forward's and the backward's
  (batch, head) pairs walked in groups of GROUPS (flash_bounds._launch_tile), so that a wave of
  programs reads a few heads' K/V from L2 instead of every head's from DRAM.
The winners are written by hand into the configs, and the whole step re-measured:
`--part step --baseline DIR` times main's defaults (an old attention/flash_triton copy in DIR)
against this checkout's on the six workloads, cuDNN beside them, and a few backward tiles
next to the new default's. `--part clamp` (step 13): the train step and the backward alone
with the default dK/dV tile's rows clamped (TileConfig.clamp_rows) and not. `--part tmadq`
(step 14): dQ added in the dK/dV pass by TMA bulk reductions, against two passes and atomics.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.bench_flash_triton_ab import (  # noqa: E402
    WORKLOADS,
    cudnn,
    fwd_config,
    impl,
    inputs,
    markdown,
    time_rows,
)
from benchmarks.bench_flash_triton_shapes import load  # noqa: E402

MHA, GQA, TRAIN = "fwd B4 H16 S4096 D128", "GQA B4 H32/KV8 S4096 D128", "train B4 H16 S4096 D128"
# (BLOCK_M, BLOCK_N, warps, stages, warp-specialised): the default's tile first
FWD_TILES = [(128, 64, 4, 2, False), (128, 64, 4, 2, True), (128, 128, 4, 2, True),
             (128, 128, 4, 2, False), (128, 64, 4, 3, True), (128, 128, 8, 2, True)]  # fmt: skip
DKDV_TILES = [(32, 64, 4, 3), (32, 64, 4, 4), (32, 64, 4, 2), (64, 64, 4, 3), (32, 128, 4, 3),
              (64, 128, 4, 2), (64, 128, 4, 3), (64, 128, 8, 3), (32, 128, 8, 3),
              (64, 64, 8, 3), (16, 64, 4, 4),
              # the TMA dK/dV kernel (flash_bwd_tma.py): the same and larger tiles
              (32, 64, 4, 3, True), (64, 64, 4, 3, True), (32, 128, 4, 3, True),
              (64, 128, 4, 2, True), (64, 128, 4, 3, True), (64, 128, 8, 3, True),
              (128, 128, 8, 2, True), (64, 64, 8, 3, True), (32, 128, 8, 3, True),
              (32, 64, 4, 4, True)]  # fmt: skip
DQ_TILES = [(128, 64, 8, 3), (128, 64, 8, 4), (128, 64, 4, 3), (64, 64, 4, 3), (64, 32, 4, 4),
            (128, 32, 8, 3), (128, 128, 8, 2), (64, 64, 4, 4), (128, 64, 8, 2),
            (128, 64, 8, 3, True), (128, 64, 4, 3, True), (128, 128, 8, 2, True),
            (64, 64, 4, 3, True), (128, 128, 8, 3, True), (128, 64, 8, 4, True)]  # fmt: skip
# Step 7's neighbours of the dK/dV winner (64, 128, 8, 3), timed beside it (the backward alone)
STEP_DKDV = [(64, 128, 8, 2), (64, 128, 8, 4), (32, 128, 8, 4)]
# Step 8: dQ by atomics in the dK/dV pass (BackwardConfig(atomic_dq=True)) at these dK/dV tiles
ATOMIC_DKDV = [(64, 128, 8, 3), (32, 128, 8, 3), (64, 64, 8, 3), (32, 64, 4, 3), (64, 128, 8, 2)]
TOL = 1e-2  # a candidate's gradients against the default's (same math, other summation order)
Row = tuple[str, str, Callable, Callable]


def forward_rows(fa: Any) -> list[tuple[str, str, Callable, Callable]]:
    rows: list[tuple[str, str, Callable, Callable]] = []
    none = lambda: None  # noqa: E731
    for name in (MHA, GQA):
        shape = WORKLOADS[name]
        rows.append((name, "cuDNN", none, lambda s=shape: cudnn(s)))
        rows.append((name, "default (autotuned)", none, lambda s=shape: impl(fa, s)))
        for bm, bn, w, st, ws in FWD_TILES if name == MHA else FWD_TILES[:3]:
            c = fwd_config(bm, bn, w, st, 0, TMA=True, WARP_SPEC=ws)
            label = f"TMA {(bm, bn, w, st)}{' ws' if ws else ''}"
            rows.append((name, label, none, lambda c=c, s=shape: impl(fa, s, 1, c)))
    return rows


def backward_rows(
    fa: Any, errs: dict[str, float], dkdv_tiles: list = DKDV_TILES, dq_tiles: list = DQ_TILES
) -> list[Row]:
    """The backward alone at the train shape, one kernel's tile varied at a time."""
    default = fa.default_backward_config(128)
    tiles = [(f"dkdv {t}", fa.BackwardConfig(fa.TileConfig(*t), default.dq)) for t in dkdv_tiles]
    tiles += [(f"dq {t}", fa.BackwardConfig(default.dkdv, fa.TileConfig(*t))) for t in dq_tiles[1:]]
    return checked_backward(fa, errs, tiles)


def atomic_rows(fa: Any, errs: dict[str, float]) -> list[Row]:
    """The backward alone: today's two passes against dQ by atomics at ATOMIC_DKDV's tiles."""
    default = fa.default_backward_config(128)
    configs = [("two passes (default)", default)]
    configs += [(f"atomic dQ, dkdv {t}", fa.BackwardConfig(fa.TileConfig(*t), default.dq, True))
                for t in ATOMIC_DKDV]  # fmt: skip
    return checked_backward(fa, errs, configs)


def checked_backward(fa: Any, errs: dict[str, float], configs: list[tuple[str, Any]]) -> list[Row]:
    """A row per (label, BackwardConfig) whose gradients match the default's (TOL); a config
    that does not fit or differs is said, not timed."""
    q, k, v = inputs(WORKLOADS[TRAIN])
    out, lse = fa.flash_fwd._launch(q, k, v, None, True, None, return_lse=True)
    dout, sm = torch.randn_like(q), 128**-0.5
    call = lambda c: lambda: fa.flash_attn_backward(dout, q, k, v, out, lse, sm, True, c)  # noqa: E731
    reference = call(fa.default_backward_config(128))()
    rows: list[Row] = []
    for label, config in configs:
        try:
            got = call(config)()
        except Exception as e:  # a tile that does not fit: said, not timed
            print(f"{label}: {type(e).__name__}: {str(e)[:160]}", flush=True)
            continue
        errs[label] = max(
            ((g.float() - r.float()).norm() / r.float().norm()).item()
            for g, r in zip(got, reference, strict=True)
        )
        if errs[label] <= TOL:
            rows.append(("bwd alone", label, lambda: None, lambda c=config: call(c)))
    return rows


def step_rows(fa: Any, old: Any, errs: dict[str, float]) -> list[Row]:
    """Whole steps: main's defaults (old) against this checkout's (new), cuDNN beside them."""
    none = lambda: None  # noqa: E731
    rows = []
    for name, shape in WORKLOADS.items():
        rows.append((name, "main", none, lambda s=shape: impl(old, s)))
        rows.append((name, "new", none, lambda s=shape: impl(fa, s)))
        if not name.startswith("window"):  # cuDNN has no window
            rows.append((name, "cuDNN", none, lambda s=shape: cudnn(s)))
    t = fa.default_backward_config(128).dkdv
    default = (t.block_m, t.block_n, t.num_warps, t.num_stages)
    return rows + backward_rows(fa, errs, [default, *STEP_DKDV], [])


# Step 9: launch orders (flash_bounds._launch_tile): 0 is the grid's own, g > 0 walks g
# (batch, head) pairs through all their tiles before the next g
GROUPS = [0, 4, 8, 16]


def in_order(fa: Any, group: int) -> Callable:
    """A row's setup: the forward's and the backward's default launch order set to group."""

    def setup() -> None:
        fa.flash_fwd_config.FORWARD_L2_GROUP = group
        fa.flash_bwd_config.BACKWARD_L2_GROUP = group

    return setup


def order_rows(fa: Any, errs: dict[str, float]) -> list[Row]:
    """Every workload but decode (its own kernel) in each launch order, cuDNN beside; then the
    backward alone with both kernels in each order (gradients checked against group 0's)."""
    from dataclasses import replace

    rows: list[Row] = []
    for name, shape in WORKLOADS.items():
        if name.startswith("decode"):
            continue
        for g in GROUPS:
            rows.append((name, f"group {g}", in_order(fa, g), lambda s=shape: impl(fa, s)))
        if not name.startswith("window"):
            rows.append((name, "cuDNN", in_order(fa, 0), lambda s=shape: cudnn(s)))
    tiles = fa.flash_bwd_config.default_tiles(128)
    configs = [
        (f"both kernels group {g}", fa.BackwardConfig(*(replace(t, l2_group=g) for t in
                                                        (tiles.dkdv, tiles.dq))))
        for g in GROUPS
    ]  # fmt: skip
    return rows + [(w, lb, in_order(fa, 0), make) for w, lb, _, make in
                   checked_backward(fa, errs, configs)]  # fmt: skip


# Step 10: the backward's tiles again, now in the grouped launch order (step 9 cut their DRAM
# reads by 4x, which may move the best tile)
REGROUP_DKDV = [(64, 128, 8, 3), (32, 64, 4, 3), (32, 128, 8, 3), (64, 128, 8, 2),
                (64, 128, 8, 4), (64, 64, 4, 3), (32, 64, 4, 4), (64, 128, 8, 3, True)]  # fmt: skip
REGROUP_DQ = [(128, 64, 8, 3), (128, 64, 8, 4), (64, 64, 4, 3), (128, 128, 8, 2),
              (128, 32, 8, 3), (64, 32, 4, 4)]  # fmt: skip


def regroup_rows(fa: Any, errs: dict[str, float]) -> list[Row]:
    """The backward alone, one kernel's tile varied, both kernels in BACKWARD_L2_GROUP."""
    from dataclasses import replace

    g = fa.flash_bwd_config.BACKWARD_L2_GROUP
    d = fa.default_backward_config(128, g)
    grouped = lambda t: replace(fa.TileConfig(*t), l2_group=g)  # noqa: E731
    tiles = [(f"dkdv {t} g{g}", fa.BackwardConfig(grouped(t), d.dq)) for t in REGROUP_DKDV]
    tiles += [(f"dq {t} g{g}", fa.BackwardConfig(d.dkdv, grouped(t))) for t in REGROUP_DQ[1:]]
    return checked_backward(fa, errs, tiles)


def with_tiles(fa: Any, shipped: Callable, change: Callable[[Any], Any] | None = None) -> Callable:
    """A row's setup: the default tiles are the shipped ones, changed by `change` (a
    BackwardConfig -> BackwardConfig) where given."""

    def tiles(head_dim: int) -> Any:
        return change(shipped(head_dim)) if change else shipped(head_dim)

    def setup() -> None:
        fa.flash_bwd_config.default_tiles = tiles

    return setup


# Step 13: the pointer dK/dV kernel's masked tiles with clamped rows (TileConfig.clamp_rows)
def clamp_rows(fa: Any, errs: dict[str, float]) -> list[Row]:
    """The train step and the backward alone with and without the clamp, cuDNN beside."""
    from dataclasses import replace

    shipped = fa.flash_bwd_config.default_tiles
    shipped_setup = with_tiles(fa, shipped)
    step = lambda: impl(fa, WORKLOADS[TRAIN])  # noqa: E731

    def clamped(on: bool) -> Callable:
        return with_tiles(fa, shipped, lambda t: replace(t, dkdv=replace(t.dkdv, clamp_rows=on)))

    rows = [(TRAIN, f"clamp {on}", clamped(on), step) for on in (False, True)]
    rows.append((TRAIN, "cuDNN", shipped_setup, lambda: cudnn(WORKLOADS[TRAIN])))
    d = fa.default_backward_config(128, fa.flash_bwd_config.BACKWARD_L2_GROUP)
    configs = [(f"bwd clamp {on}", fa.BackwardConfig(replace(d.dkdv, clamp_rows=on), d.dq))
               for on in (False, True)]  # fmt: skip
    alone = checked_backward(fa, errs, configs)
    return rows + [(w, lb, shipped_setup, make) for w, lb, _, make in alone]


# Step 14: dQ added in the dK/dV pass by TMA bulk reductions (BackwardConfig(tma_dq=True))
def tma_dq_rows(fa: Any, errs: dict[str, float]) -> list[Row]:
    """The backward alone: two passes, scalar atomics and TMA reductions at ATOMIC_DKDV's
    tiles; then the train step with the best-placed candidates, cuDNN beside."""
    shipped = fa.flash_bwd_config.default_tiles
    shipped_setup = with_tiles(fa, shipped)
    g = fa.flash_bwd_config.BACKWARD_L2_GROUP
    d = fa.default_backward_config(128, g)
    tile = lambda t: fa.TileConfig(*t, l2_group=g)  # noqa: E731
    configs = [
        ("two passes (default)", d),
        (f"atomic dQ, dkdv {ATOMIC_DKDV[0]}", fa.BackwardConfig(tile(ATOMIC_DKDV[0]), d.dq, True)),
    ]
    configs += [(f"TMA-reduced dQ, dkdv {t}", fa.BackwardConfig(tile(t), d.dq, True, True))
                for t in ATOMIC_DKDV]  # fmt: skip

    def reduced_in(dkdv: tuple) -> Callable:
        return with_tiles(fa, shipped, lambda t: fa.BackwardConfig(
            fa.TileConfig(*dkdv, l2_group=t.dkdv.l2_group), t.dq, True, True))  # fmt: skip

    step = lambda: impl(fa, WORKLOADS[TRAIN])  # noqa: E731
    rows = [(TRAIN, "two passes", shipped_setup, step)]
    rows += [(TRAIN, f"TMA-reduced dQ {t}", reduced_in(t), step) for t in ATOMIC_DKDV[:2]]
    rows.append((TRAIN, "cuDNN", shipped_setup, lambda: cudnn(WORKLOADS[TRAIN])))
    alone = checked_backward(fa, errs, configs)
    return rows + [(w, lb, shipped_setup, make) for w, lb, _, make in alone]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parts = ("all", "forward", "backward", "step", "atomic", "order", "regroup", "clamp", "tmadq")
    parser.add_argument("--part", choices=parts, default="all")
    parser.add_argument("--baseline", help="--part step: main's attention/flash_triton copy")
    args = parser.parse_args()
    t0 = time.perf_counter()
    fa = load(REPO / "attention" / "flash_triton" / "build" / "torch-universal", "_fa_tiles")
    errs: dict[str, float] = {}
    chosen = forward_rows(fa) if args.part in ("all", "forward") else []
    if args.part == "step":
        old = load(pathlib.Path(args.baseline) / "build" / "torch-universal", "_fa_main")
        chosen = step_rows(fa, old, errs)
    if args.part == "atomic":
        chosen = atomic_rows(fa, errs)
    if args.part == "order":
        chosen = order_rows(fa, errs)
    if args.part == "regroup":
        chosen = regroup_rows(fa, errs)
    if args.part == "clamp":
        chosen = clamp_rows(fa, errs)
    if args.part == "tmadq":
        chosen = tma_dq_rows(fa, errs)
    if args.part in ("all", "backward"):
        chosen += backward_rows(fa, errs)
    if args.part in ("all", "backward", "atomic", "regroup"):
        chosen += [(TRAIN, "cuDNN", lambda: None, lambda: cudnn(WORKLOADS[TRAIN]))]
        chosen += [(TRAIN, "default", lambda: None, lambda: impl(fa, WORKLOADS[TRAIN]))]
    print(f"gradient checks vs the default tiles: {errs}", flush=True)
    rows = time_rows({"new": fa}, args.rounds, chosen=chosen)
    table = markdown(rows)
    print(table, flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "gradient errors": errs, "rows": rows,
              "seconds": time.perf_counter() - t0}  # fmt: skip
    if os.environ.get("OUT"):
        out = pathlib.Path(os.environ["OUT"])
        (out / "tiles.json").write_text(json.dumps(result, indent=1))
        (out / "tiles.md").write_text(table + "\n")
    print(f"{result['device']}; done in {result['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
