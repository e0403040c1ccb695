#!/usr/bin/env bash
# Issue 44's GPU call: the A/B (bench_flash_triton_ab.py, which writes its keep/drop decision
# into this checkout's flash_fwd.py with --patch), then the six workloads through the
# project's Compare (median of 10 steps) on the code as decided. Run from the repository root
# of a throwaway copy, with the old kernels in .baseline/ and the CLI's wheels in ../.whl/:
#   bash benchmarks/flash_triton_ab_session.sh
# Results under $OUT: smi.txt, ab.log, ab.json, ab.md, compare-*.txt.
set -u
OUT=${OUT:-/tmp/ab-out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv | tee "$OUT/smi.txt"
timeout "${AB_LIMIT_S:-150}" python3 benchmarks/bench_flash_triton_ab.py --baseline .baseline \
  --rounds 2 --workers 12 --patch > "$OUT/ab.log" 2>&1
tail -n 80 "$OUT/ab.log" | grep -v " | [0-9.]*$"
grep -n "^OVERLAP_UNMASKED =\|^PACK_GQA_DEFAULT =" attention/flash_triton/build/torch-universal/flash_fwd.py
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site ../.whl/*.whl
export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
OURS=kernels-local-triton
compare() {  # name, then Compare's shape flags
  local name=$1
  shift
  timeout 60 python3 -m profiling compare --steps 10 --no-store --markdown --out /tmp/cmp "$@" \
    > "$OUT/compare-$name.txt" 2>&1
  grep -E "^\| (kernels-local-triton|sdpa-cudnn|flex) " "$OUT/compare-$name.txt" | cut -c1-160
}
compare fwd-s4096 --variants $OURS,sdpa-cudnn --batch 4 --heads 16 --seq-len 4096 --head-dim 128
compare gqa --variants $OURS,sdpa-cudnn --batch 4 --heads 32 --kv-heads 8 --seq-len 4096 \
  --head-dim 128
compare train --variants $OURS,sdpa-cudnn --batch 4 --heads 16 --seq-len 4096 --head-dim 128 \
  --mode train
compare decode --variants $OURS,sdpa-cudnn --batch 16 --heads 32 --kv-heads 8 --q-len 1 \
  --seq-len 8192 --head-dim 128
compare fwd-s1024 --variants $OURS,sdpa-cudnn --batch 8 --heads 16 --seq-len 1024 --head-dim 64
compare window --variants $OURS,flex --batch 4 --heads 16 --seq-len 4096 --head-dim 128 \
  --window 512
