#!/usr/bin/env bash
# Device calls of the fortieth session (2026-11-29), H200.
#   A: the checks the last sessions left open: every test of test_backward_families_gpu.py, each in its own pytest
#      (a time limit per test, TESTS_P at once: the file at -n 8 had not finished in 240 s, 2026-11-29), the D 128
#      producer prototype (FLASHKIT_BWD_PP_PRODUCER 1, built beside main while the tests run) under synccheck after
#      its barrier fix, then fwd_clocks.py --fwd-bwd (bwd.md's open fwd_bwd item).
#   B: the families file's tests alone (A's first run lost them: ids relative to tests/python, run from /tmp).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session40.sh A")
set -u -o pipefail
PARTS=${1:?usage: session40.sh A}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s40
. "$(dirname "$0")/device_steps.sh"
families() {  # every test of the families file, each in its own pytest (device_steps.sh tests_each)
  local t0=$SECONDS
  tests_each "$TREE/tests/python/test_backward_families_gpu.py"
  echo "families file $((SECONDS - t0))s" | tee -a "$O/summary.txt"; pack
}
if [[ $PARTS == *B* ]]; then install_tree "$TREE"; pack; families; fi
if [[ $PARTS == *A* ]]; then
  install_tree "$TREE"; pack
  (VARIANT_INST_DIR=bwd_sm90/inst define_variant "$TREE" /tmp/prodtree "FLASHKIT_BWD_PP_PRODUCER 1" \
    "bwd_sm90_bf16_hd128 bwd_sm90_fp16_hd128" /tmp/pkg_prod > "$O/variant_build.log" 2>&1) &
  vb=$!
  families
  wait $vb; tail -3 "$O/variant_build.log" >> "$O/summary.txt"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  (cd /tmp && step synccheck_prod 240 env PYTHONPATH=/tmp/pkg_prod $S --tool synccheck --error-exitcode 1 \
    --print-limit 10 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 128)
  tail -n 2 "$O/synccheck_prod.log" >> "$O/summary.txt"
  unset PYTORCH_NO_CUDA_MEMORY_CACHING; pack
  (cd /tmp && step fwd_bwd_clocks 150 python3 "$TREE/scripts/dev/fwd_clocks.py" --fwd-bwd 128:16384:0 128:8192:0)
  pack
fi
