#!/usr/bin/env bash
# Device run of the deterministic mode's fixed-point dQ (docs/kernels/bwd.md "Deterministic dQ in
# fixed point"): install; STEPS (default "tests bench san"):
#   tests  the backward GPU tests (test_backward_gpu.py, TEST_K a -k filter) and the residency test;
#   bench  the FA3 sweep bf16 (BENCH_ARGS, default "--heads-dims 64 128") in deterministic mode with
#          FLASHKIT_BWD_DET_TURNS=1 (the turns) and without (fixed point), ROUNDS interleaved rounds,
#          then the fast mode once; ab.txt: fixed / turns and fast / turns per row (ab_ratios.py);
#   san    memcheck and racecheck of sanitize_bwd.py --quick $SAN_ARGS (fast and deterministic cases).
#   run(command="bash scripts/dev/bwd_fixed_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdfixed
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
cd /tmp
for s in ${STEPS:-tests bench san}; do
  case $s in
  tests)
    step tests 330 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ${TEST_K:+-k "$TEST_K"} \
      "$TREE/tests/python/test_backward_gpu.py" "$TREE/tests/python/test_bwd_det_residency_gpu.py"
    tail -3 "$O/tests.log" ;;
  bench)
    for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
      step "bench_turns$r" 200 env FLASHKIT_BWD_DET_TURNS=1 python3 -m flashkit.bench --sweep fa3 --mode bwd \
        --deterministic ${BENCH_ARGS:---heads-dims 64 128} --impls flashkit --out-dir "$O/bench" --tag "turns$r" --no-plot
      step "bench_fixed$r" 200 python3 -m flashkit.bench --sweep fa3 --mode bwd --deterministic \
        ${BENCH_ARGS:---heads-dims 64 128} --impls flashkit --out-dir "$O/bench" --tag "fixed$r" --no-plot
    done
    step bench_fast1 200 python3 -m flashkit.bench --sweep fa3 --mode bwd ${BENCH_ARGS:---heads-dims 64 128} \
      --impls flashkit --out-dir "$O/bench" --tag fast1 --no-plot
    python3 "$TREE/scripts/dev/ab_ratios.py" "$O/bench" turns fixed fast | tee "$O/ab.txt" | grep GEOMEAN ;;
  san)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck; do
      step $tool 200 $S --tool $tool --error-exitcode 1 --print-limit 50 python3 "$TREE/scripts/sanitize_bwd.py" --quick ${SAN_ARGS:-}
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING ;;
  esac
done
cat "$O/summary.txt"
