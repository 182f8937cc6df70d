#!/usr/bin/env bash
# Device run: A/B of the backward against an older tree (.carry/old; FA3 sweep bf16 D 64/128),
# then the results file of the current tree: backward and forward+backward at D 64/128/256
# with SDPA cuDNN and flash, the deterministic mode, the backward tests and memcheck.
#   run(carry=[".carry/cur", ".carry/old"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/bwd_results.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
OLD=$(cd "$TREE/../old" && pwd)
O=${OUT:-/tmp}/bwdres
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
install_cmd "$OLD"
(cd /tmp && step install_old 300 "${INSTALL[@]}")
cd /tmp
BQ() { step "$1" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --impls flashkit --out-dir "$O/ab" --tag "$1"; }
BQ old1
install_cmd "$TREE"
step install_new 300 "${INSTALL[@]}"
BQ new1
step results 400 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --mode bwd fwd_bwd \
  --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag bwd
step tests_bwd 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck_bwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick
tar -czf "${OUT:-/tmp}/bwdres.tgz" -C "$(dirname "$O")" "$(basename "$O")"
