#!/usr/bin/env bash
# Device check of the key-split D 256 kernel's deterministic mode on TMA reduce-adds: build,
# sanitize_bwd.py at D 256, the deterministic A/B (default vs FLASHKIT_BWD_DQ_TMA=0, the reds)
# and the fast mode once, the D 256 deterministic GPU tests (bitwise: over runs, and TMA vs
# reds), memcheck and racecheck. Steps write their logs as they finish (a short budget).
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_ks_det.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ksdet
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install 300 "${INSTALL[@]}"
cd /tmp
step sanitize_ks 100 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256
B() {  # B TAG [--deterministic] [VAR=VALUE...]
  local tag=$1 det=$2; shift 2
  step "$tag" 100 env "$@" python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd $det \
    --impls flashkit --out-dir "$O/ab" --tag "$tag" --no-plot
}
B dettma --deterministic FLASHKIT_BWD_DQ_TMA=1
B detreds --deterministic FLASHKIT_BWD_DQ_TMA=0
B fast ""
step tests_det 120 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider \
  test_backward_gpu.py test_backward_families_gpu.py -k 'D256 and (determin or poison) or d256'"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck_ks 60 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
step racecheck_ks 90 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 256
