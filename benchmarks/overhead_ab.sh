#!/usr/bin/env bash
# A Profile click before and after a change, on one machine: benchmarks/overhead.py of two
# source trees, alternating, so drift of the host hits both alike (docs/performance.md).
#   bash benchmarks/overhead_ab.sh BEFORE_TREE AFTER_TREE OUT [variants] [rounds] [repeats]
# Each tree is a checkout (e.g. `git archive <commit> | tar x -C before`); the wheels the H200
# lacks must already be on PYTHONPATH (benchmarks/h200_session.sh installs them).
set -u
before=$(cd "$1" && pwd) after=$(cd "$2" && pwd) out=$3
variants=${4:-naive,sdpa-flash,sdpa-cudnn,kernels-flash-attn2} rounds=${5:-2} repeats=${6:-11}
mkdir -p "$out"
site=${PYTHONPATH:-}
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    tree=$before; [ "$side" = after ] && tree=$after
    echo "== $side, round $round ($(date +%T))"
    (cd "$tree" && PYTHONPATH="$site:$tree" timeout 300 python3 benchmarks/overhead.py \
      --variant "$variants" --repeats "$repeats" --out "$out/$side-$round") 2>&1 | grep "^|"
  done
done
