#!/usr/bin/env bash
# Build and test one source tree on the GPU machine (a branch snapshot carried along), in
# one device call:
#
#   git archive wip/bwd-sm90 | (mkdir -p .carry/wip-bwd && tar -x -C .carry/wip-bwd)   # here
#   run(carry=[".carry/wip-bwd"], command="scripts/dev/validate_tree.sh .carry/wip-bwd \
#       $OUT/wip-bwd test_backward_gpu.py test_backward_families_gpu.py")            # there
#
# Installs the tree with pip (sm_90a only, no C++ tests: ~30 s on 16 cores), runs
# scripts/dev/bwd_check.py if the tree has it (with the Hopper backward's v1 / ping-pong
# A/B where the tree has both), the given GPU test files from the tree's tests/python
# (-n 4), and compute-sanitizer memcheck (and racecheck on the backward) on the tree's
# sanitize scripts; every step under a time limit; logs go to OUT_DIR.
# The installed flashkit package is replaced: install main again afterwards if needed.
set -u -o pipefail
TREE=$(cd "${1:?usage: validate_tree.sh TREE OUT_DIR [TEST_FILE...]}" && pwd)
OUT_DIR=${2:?usage: validate_tree.sh TREE OUT_DIR [TEST_FILE...]}
shift 2
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
export CPLUS_INCLUDE_PATH=${CPLUS_INCLUDE_PATH:-/usr/local/cuda/include/cccl}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16} PYTHONUNBUFFERED=1
status=0
step() {  # step NAME SECONDS CMD...: run under a time limit (a hung kernel must not eat the call), log, record
  local name=$1 limit=$2
  shift 2
  if timeout "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1; then
    echo "ok   $name" | tee -a "$OUT_DIR/summary.txt"
  else
    echo "FAIL $name (exit $?, see $name.log)" | tee -a "$OUT_DIR/summary.txt"
    status=1
  fi
}
: > "$OUT_DIR/summary.txt"
step install 240 python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$TREE/build/gpu" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF "$TREE"
# The quick checks first: a wrong or hanging kernel shows here within seconds.
if [ -f "$TREE/scripts/dev/bwd_check.py" ]; then
  step bwd_check 60 bash -c "cd /tmp && python3 '$TREE/scripts/dev/bwd_check.py'"
  step bwd_check_portable 60 bash -c "cd /tmp && FLASHKIT_BWD_PORTABLE=1 python3 '$TREE/scripts/dev/bwd_check.py'"
  if grep -q FLASHKIT_BWD_SM90_V1 "$TREE/src/launch/bwd_sm90_launch.cuh" 2>/dev/null; then
    # the Hopper backward's two variants (ping-pong default, v1 by env) in one machine session
    step bwd_check_v1 60 bash -c "cd /tmp && FLASHKIT_BWD_SM90_V1=1 python3 '$TREE/scripts/dev/bwd_check.py'"
    step bwd_perf_pp 120 bash -c "cd /tmp && python3 '$TREE/scripts/dev/bwd_check.py' --perf"
    step bwd_perf_v1 120 bash -c "cd /tmp && FLASHKIT_BWD_SM90_V1=1 python3 '$TREE/scripts/dev/bwd_check.py' --perf"
  fi
fi
if [ $# -gt 0 ]; then
  step pytest_gpu 300 bash -c "cd '$TREE/tests/python' && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider $*"
fi
for s in sanitize_small.py sanitize_bwd.py; do
  [ -f "$TREE/scripts/$s" ] || continue
  step "memcheck_${s%.py}" 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 /usr/local/cuda/bin/compute-sanitizer \
    --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/$s" --quick --dims 64 128 256
done
if [ -f "$TREE/scripts/sanitize_bwd.py" ]; then
  step racecheck_sanitize_bwd 300 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 /usr/local/cuda/bin/compute-sanitizer \
    --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128 256
fi
exit $status
