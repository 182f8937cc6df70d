#!/usr/bin/env bash
# Device run: D 64 backward with 128-row blocks (FLASHKIT_BWD_D64_M128=1; pp_traits.cuh / kernel_pp.cuh
# kRowSplit) against the 64-row kernel, one build, env A/B. Prediction (bwd-redesign.md 5.1): the
# fixed part of a step (~57% of a 64-row D 64 step) spread over twice the FLOPs: D 64 fast +9..18%,
# deterministic alike. Steps: install; the two m128 tests (sanitize_bwd.py --dims 64 with the switch,
# the comparison with the 64-row kernel); A/B round 1; memcheck --quick; A/B round 2; racecheck --quick.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/d64_m128.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/m128
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install 300 "${INSTALL[@]}"
cd /tmp
step tests 200 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider \
  test_backward_families_gpu.py -k m128"
ab() {
  for v in 0 1; do
    step "ab_m$v-$1" 120 env FLASHKIT_BWD_D64_M128=$v python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --mode bwd \
      --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "m$v-$1" --no-plot
  done
}
ab 1
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck 100 env FLASHKIT_BWD_D64_M128=1 $S --tool memcheck --error-exitcode 1 --print-limit 20 \
  python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 --dtypes bfloat16
unset PYTORCH_NO_CUDA_MEMORY_CACHING
ab 2
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step racecheck 120 env FLASHKIT_BWD_D64_M128=1 $S --tool racecheck --error-exitcode 1 --print-limit 20 \
  python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 --dtypes bfloat16
tar -czf "${OUT:-/tmp}/m128.tgz" -C "$(dirname "$O")" "$(basename "$O")"
