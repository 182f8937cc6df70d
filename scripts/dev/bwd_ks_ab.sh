#!/usr/bin/env bash
# Device run for the key-split D 256 backward (kernel_ks.cuh): build; correctness
# (sanitize_bwd.py at D 256 with the default kernels; TESTS=1 adds the D 256 backward GPU tests);
# an interleaved A/B in one build over the FA3 sweep at D 256 (bwd), ROUNDS rounds of the
# variants given as NAME=ENV arguments (ENV: space-separated VAR=VALUE, empty = defaults);
# the deterministic mode once (DET=1); then memcheck, racecheck and synccheck at D 256.
# INSTALL_STEP=0: no build (the tree was built by an earlier script of the same call).
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_ks_ab.sh ks= reds='FLASHKIT_BWD_DQ_TMA=0' v1='FLASHKIT_BWD_D256_V1=1'")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ksab
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
[ "${INSTALL_STEP:-1}" = 1 ] && step install 400 "${INSTALL[@]}"
cd /tmp
step sanitize_ks 200 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256
[ "${TESTS:-0}" = 1 ] && step tests_d256 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 \
  -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py -k '256 or families' -x"
B() {  # B TAG [VAR=VALUE...]
  local tag=$1; shift
  step "$tag" 200 env "$@" python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd ${DETARG:-} \
    --impls flashkit --out-dir "$O/ab" --tag "$tag" --no-plot
}
for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
  for v in "$@"; do
    # shellcheck disable=SC2086
    B "${v%%=*}$r" ${v#*=}
  done
done
[ "${DET:-1}" = 1 ] && DETARG=--deterministic B det
if [ "${SANIT:-1}" = 1 ]; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_ks 200 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
  step racecheck_ks 300 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
  step synccheck_ks 200 $S --tool synccheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
fi
tar -czf "${OUT:-/tmp}/ksab.tgz" -C "$(dirname "$O")" "$(basename "$O")"
