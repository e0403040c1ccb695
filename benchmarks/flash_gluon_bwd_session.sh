#!/usr/bin/env bash
# Issue 44, step 15's table call (session 11, H100): from the repository root on the GPU
# machine, with the CLI's wheels in .whl/ (bash ../shared/tools/gpu-wheels.sh --cli):
#   OUT=dir bash benchmarks/flash_gluon_bwd_session.sh
# 1. the first click: an empty Triton cache, the first train step at B4 H16 S4096 D128;
# 2. the backward alone at other shapes, Triton's dK/dV pass against the Gluon one
#    (bench_flash_gluon_bwd.py --shapes); 3. the six workloads through the project's Compare
#    (median of 10 steps); 4. pytest -m gpu tests/attention. Results under $OUT.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/smi.txt
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site
TRITON_CACHE_DIR=$(mktemp -d) timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/first-click.txt"
import time, torch, sys
t0 = time.perf_counter()
from benchmarks.bench_flash_triton_shapes import load
fa = load(__import__("pathlib").Path("attention/flash_triton/build/torch-universal"), "fa")
q, k, v = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in "qkv")
torch.cuda.synchronize(); t1 = time.perf_counter()
out = fa.flash_attn_func(q, k, v, causal=True); torch.cuda.synchronize(); t2 = time.perf_counter()
out.backward(torch.randn_like(out)); torch.cuda.synchronize(); t3 = time.perf_counter()
out = fa.flash_attn_func(q, k, v, causal=True); out.backward(torch.randn_like(out)); torch.cuda.synchronize(); t4 = time.perf_counter()
print(f"empty Triton cache, B4 H16 S4096 D128 causal train step: first forward {t2-t1:.2f} s, first backward {t3-t2:.2f} s, second step {t4-t3:.3f} s (import {t1-t0:.1f} s)")
PY
timeout 200 python3 benchmarks/bench_flash_gluon_bwd.py --shapes --rounds 3 > $OUT/shapes.txt 2>&1
grep -v " | [0-9.]*$" $OUT/shapes.txt | tail -16
OURS=kernels-local-triton
compare() {
  local name=$1; shift
  timeout 75 python3 -m profiling compare --steps 10 --no-store --markdown --out /tmp/cmp "$@" > "$OUT/compare-$name.txt" 2>&1
  echo "== $name"; grep -E "^\| (kernels-local-triton|sdpa-cudnn|flex) " "$OUT/compare-$name.txt" | cut -c1-150
}
compare fwd-s1024 --variants $OURS,sdpa-cudnn --batch 8 --heads 16 --seq-len 1024 --head-dim 64
compare fwd-s4096 --variants $OURS,sdpa-cudnn --batch 4 --heads 16 --seq-len 4096 --head-dim 128
compare train --variants $OURS,sdpa-cudnn --batch 4 --heads 16 --seq-len 4096 --head-dim 128 --mode train
compare gqa --variants $OURS,sdpa-cudnn --batch 4 --heads 32 --kv-heads 8 --seq-len 4096 --head-dim 128
compare decode --variants $OURS,sdpa-cudnn --batch 16 --heads 32 --kv-heads 8 --q-len 1 --seq-len 8192 --head-dim 128
compare window --variants $OURS,flex --batch 4 --heads 16 --seq-len 4096 --head-dim 128 --window 512
timeout 280 python3 -m pytest -q -m gpu -p no:cacheprovider tests/attention 2>&1 | tail -6 | tee $OUT/tests.txt
