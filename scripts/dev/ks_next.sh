#!/usr/bin/env bash
# One device call for the D 256 key-split kernel's prepared changes (branch wip/ks-det-rotate, on
# wip/ks-stage-conflicts):
#   - conflict-free dQ staging (FLASHKIT_BWD_KS_STAGE_SWAP, default 1; 0 = main's staging);
#     prediction +2..6% fast and deterministic (ncu: 2x the ideal wavefronts on every staging store)
#   - the rotated deterministic walk without a mask (FLASHKIT_BWD_DET_ROTATE=0 keeps the ascending
#     order); prediction: deterministic non-causal S <= 8k from 0.60-0.75 of fast to >= 0.8
# Steps (STEPS, default "build tests det ab sanit"):
#   build  pip install of the tree
#   tests  sanitize_bwd.py --dims 256; D 256 backward / family tests; the residency tests (D 128
#          and D 256); the rotation CPU model
#   det    env A/B in this build: FLASHKIT_BWD_DET_ROTATE=0 vs default, deterministic and fast
#          rows, FA3 sweep D 256, two interleaved rounds
#   ab     define A/B: FLASHKIT_BWD_KS_STAGE_SWAP 0 vs 1, fast mode, two interleaved rounds
#   sanit  memcheck / racecheck of sanitize_bwd.py --quick --dims 256 (the default build)
# ~7 minutes.
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/ks_next.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ksnext
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"build tests det ab sanit"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
has build && step install 400 "${INSTALL[@]}"
cd /tmp
if has tests; then
  step sanitize_bwd256 120 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256
  step tests_bwd256 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider \
    test_backward_gpu.py test_backward_families_gpu.py -k '(D256 or d256 or 256) and not pair'"
  step tests_residency 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider \
    test_bwd_det_residency_gpu.py"
  step tests_rotation_cpu 60 bash -c "cd $TREE/tests/python && python3 -m pytest -q -p no:cacheprovider \
    test_bwd_det_rotation_cpu.py"
fi
if has det; then
  for r in 1 2; do
    for v in asc rot; do
      e=FLASHKIT_BWD_DET_ROTATE=1; [ $v = asc ] && e=FLASHKIT_BWD_DET_ROTATE=0
      step "det_$v$r" 150 env $e python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd \
        --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "det-$v$r" --no-plot
    done
  done
fi
has ab && OUT=$O ROUNDS=2 bash "$TREE/scripts/dev/bwd_define_ab.sh" s0='FLASHKIT_BWD_KS_STAGE_SWAP 0' s1= \
  > "$O/ab.log" 2>&1
if has sanit; then
  has ab && step rebuild 400 "${INSTALL[@]}"  # (the A/B leaves its last variant installed)
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_bwd256 120 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
  step racecheck_bwd256 200 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
    --quick --dims 256
fi
tar -czf "${OUT:-/tmp}/ksnext.tgz" -C "$(dirname "$O")" "$(basename "$O")"
