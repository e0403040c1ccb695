#!/usr/bin/env bash
# One batched H200 call (device tool): GPU tests, results tables, fidelity, overhead.
#   bash benchmarks/h200_session.sh [steps...]   steps: tests fidelity overhead stages floor plain after idle first reference views triton training gputrain gpuinfer fidelity_train fixtures timing
# Needs the wheels from shared/tools/gpu-wheels.sh in .whl (plotly, kernels, msgspec, ...).
set -u
FINAL=${OUT:-h200-out}
OUT=$FINAL/w  # everything lands here, then one tarball comes back (the tool returns ≤ 8 files)
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
steps=${*:-tests fidelity overhead}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
  python3 -c "import torch, triton, pandas, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'pandas', pandas.__version__, 'numpy', numpy.__version__)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for step in $steps; do
  echo "== $step ($(date +%T))"
  case $step in
    tests)
      ATTNPROF_RESULTS="$OUT/res" timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider \
        tests/gpu/test_gpu.py tests/attention/test_flash_triton.py 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25
      python3 benchmarks/results_h200.py --from "$OUT/res" > /dev/null ;;
    fidelity) timeout 500 python3 benchmarks/fidelity.py --out "$OUT/fidelity" 2>&1 \
        | tee "$OUT/fidelity.log" | grep "^|" | tail -30 ;;
    overhead)
      timeout 420 python3 benchmarks/overhead.py --variant "${OVERHEAD_VARIANTS:-all}" \
        --out "$OUT/overhead" 2>&1 | grep -v USDT | tail -20 ;;
    stages)
      timeout 240 python3 benchmarks/click_stages.py --variant ${STAGES_VARIANTS:-sdpa-flash \
        kernels-flash-attn2 naive} 2>&1 | grep -v USDT | tee "$OUT/stages.txt" ;;
    floor) timeout 200 python3 benchmarks/parse_floor.py 2>&1 | tee "$OUT/floor.txt" ;;
    plain) timeout 200 python3 benchmarks/plain_floor.py 2>&1 | tee "$OUT/plain.txt" ;;
    after)
      for teardown in unset 1 0; do
        if [ $teardown = unset ]; then env -u TEARDOWN_CUPTI timeout 100 python3 benchmarks/after_profile.py
        else TEARDOWN_CUPTI=$teardown timeout 100 python3 benchmarks/after_profile.py; fi
      done 2>&1 | grep -v USDT | tee "$OUT/after.txt" ;;
    idle)
      timeout 300 python3 benchmarks/idle_gpu.py --variant ${IDLE_VARIANTS:-kernels-flash-attn2 \
        sdpa-cudnn sdpa-flash flex naive} --shape post long 2>&1 | grep "^|" | tee "$OUT/idle.txt" ;;
    first)
      for mode in plain hot settle; do timeout 120 python3 benchmarks/first_run.py $mode; done \
        2>&1 | grep "run\|call" | tee "$OUT/first.txt" ;;
    reference) timeout 120 python3 benchmarks/reference_cost.py 2>&1 | tee "$OUT/reference.txt" ;;
    views) timeout 300 python3 benchmarks/gpu_views.py --out "$OUT/views" 2>&1 | tail -40 ;;
    triton) timeout 240 python3 benchmarks/bench_flash_triton.py 2>&1 | tail -30 ;;
    fidelity_train) timeout 300 python3 benchmarks/fidelity_train.py 2>&1 | grep -v USDT \
        | tee "$OUT/fidelity_train.md" | grep "^|" ;;
    gputrain)
      ATTNPROF_RESULTS="$OUT/res" timeout 420 python3 -m pytest -m gpu -q -p no:cacheprovider \
        tests/gpu/test_gpu_training.py tests/attention/test_flash_triton_bwd.py 2>&1 | tee "$OUT/pytest-gpu-training.log" | tail -30 ;;
    gpuinfer)
      ATTNPROF_RESULTS="$OUT/res" timeout 400 python3 -m pytest -m gpu -q -p no:cacheprovider \
        tests/gpu/test_gpu_inference.py ${INFER_EXTRA:-} 2>&1 | tee "$OUT/pytest-gpu-inference.log" | tail -40 ;;
    fixtures) timeout 300 python3 benchmarks/capture_fixtures.py --out "$OUT/fixtures" 2>&1 \
        | grep -v USDT | tail -40 ;;
    training) timeout 480 python3 benchmarks/training_h200.py --out "$OUT/training" \
        ${TRAINING_ARGS:-} 2>&1 | grep -v USDT | tee "$OUT/training.md" ;;
    timing)
      ATTNPROF_RESULTS="$OUT/res" timeout ${TIMING_TEST_S:-240} python3 -m pytest -m gpu -q \
        -p no:cacheprovider tests/gpu/test_gpu_timing.py 2>&1 | tee "$OUT/pytest-gpu-timing.log" | tail -30
      timeout ${TIMING_BENCH_S:-300} python3 benchmarks/timing_h200.py --out "$OUT/timing" 2>&1 \
        | grep -v USDT | tee "$OUT/timing.log" | tail -60
      if [ -n "${TIMING_EXTRA:-}" ]; then  # e.g. "tests/gpu/test_gpu.py -k post": the eager path too
        timeout ${TIMING_EXTRA_S:-200} python3 -m pytest -m gpu -q -p no:cacheprovider \
          $TIMING_EXTRA 2>&1 | tee "$OUT/pytest-gpu-extra.log" | tail -15
      fi ;;
  esac
done
echo "== packing ($(date +%T))"
tar czf "$FINAL/bundle.tar.gz" -C "$OUT" . && rm -rf "$OUT" && ls -la "$FINAL"
