#!/usr/bin/env bash
# Device run for the key-split D 256 backward (kernel_ks.cuh): build, correctness (the D 256
# backward tests, sanitize_bwd.py at D 256 with the default kernel and with
# FLASHKIT_BWD_D256_V1=1), then an interleaved A/B in one build: ks, v1, ks, v1 over the FA3
# sweep at D 256 (bwd, and the deterministic mode once each), then memcheck and racecheck.
# STEPS (default "install tests ab det sanit").
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_ks_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ksab
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"install tests ab det sanit"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
has install && step install 400 "${INSTALL[@]}"
cd /tmp
if has tests; then
  step sanitize_ks 200 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256
  step tests_d256 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
    test_backward_gpu.py test_backward_families_gpu.py -k '256 or families' -x"
fi
B() {  # B TAG [ENV...]
  local tag=$1; shift
  step "$tag" 200 env "$@" python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd --impls flashkit \
    --out-dir "$O/ab" --tag "$tag" --no-plot
}
if has ab; then
  B ks1 FLASHKIT_BWD_D256_V1=0
  B v1a FLASHKIT_BWD_D256_V1=1
  B ks2 FLASHKIT_BWD_D256_V1=0
  B v1b FLASHKIT_BWD_D256_V1=1
fi
if has det; then
  for v in 0 1; do
    step "det$v" 200 env FLASHKIT_BWD_D256_V1=$v python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd \
      --deterministic --impls flashkit --out-dir "$O/ab" --tag "det$v" --no-plot
  done
fi
if has sanit; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_ks 200 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
  step racecheck_ks 300 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
  step synccheck_ks 200 $S --tool synccheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
fi
tar -czf "${OUT:-/tmp}/ksab.tgz" -C "$(dirname "$O")" "$(basename "$O")"
