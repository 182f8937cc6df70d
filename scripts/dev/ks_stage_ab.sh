#!/usr/bin/env bash
# One device call for the D 256 key-split kernel's conflict-free dQ staging (branch
# wip/ks-stage-conflicts; FLASHKIT_BWD_KS_STAGE_SWAP, default 1 there, 0 = main's SASS):
#   1. build; sanitize_bwd.py --dims 256; the D 256 backward / family GPU tests
#   2. define A/B: FLASHKIT_BWD_KS_STAGE_SWAP 0 vs 1, two interleaved rounds, FA3 sweep D 256 bwd
#      (prediction: +2..6%; ncu put 2x the ideal wavefronts on every staging store)
#   3. deterministic rows of both variants (the same staging), 4k / 16k
#   4. memcheck / racecheck of sanitize_bwd.py --quick --dims 256
# STEPS (default "build tests ab det sanit") picks some. ~6 minutes.
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/ks_stage_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ksstage
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"build tests ab det sanit"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
has build && step install 400 "${INSTALL[@]}"
cd /tmp
if has tests; then
  step sanitize_bwd256 120 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256
  step tests_bwd256 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider \
    test_backward_gpu.py test_backward_families_gpu.py -k 'D256 or d256 or 256'"
fi
has ab && OUT=$O ROUNDS=2 bash "$TREE/scripts/dev/bwd_define_ab.sh" s0='FLASHKIT_BWD_KS_STAGE_SWAP 0' s1= \
  > "$O/ab.log" 2>&1
if has det; then
  for v in s0 s1; do
    d=; [ $v = s0 ] && d='FLASHKIT_BWD_KS_STAGE_SWAP 0'
    OUT=$O/det ROUNDS=1 BENCH_ARGS="--seqlens 4096 16384 --deterministic" bash "$TREE/scripts/dev/bwd_define_ab.sh" \
      "$v=$d" > "$O/det_$v.log" 2>&1
  done
fi
if has sanit; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_bwd256 120 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
  step racecheck_bwd256 200 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
    --quick --dims 256
fi
tar -czf "${OUT:-/tmp}/ksstage.tgz" -C "$(dirname "$O")" "$(basename "$O")"
