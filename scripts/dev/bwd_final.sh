#!/usr/bin/env bash
# Device run: the backward results file of this tree (backward and forward+backward at D 64/128/256
# with SDPA cuDNN and flash; the deterministic mode) and the whole GPU pytest suite (SUITE=bwd:
# the backward tests, memcheck and racecheck instead).
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> [SUITE=bwd] bash .carry/cur/scripts/dev/bwd_final.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdfinal
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
step results 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --mode bwd fwd_bwd \
  --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag bwd
python3 "$TREE/scripts/dev/bwd_summary.py" "$O"/bench/*-bwd.csv | tee -a "$O/summary.txt"
if [ "${SUITE:-all}" = bwd ]; then  # only the backward changed: its tests and sanitizers
  step tests_bwd 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py test_bwd_det_residency_gpu.py"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_bwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick
  step racecheck_bwd 200 $S --tool racecheck --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128
else
  step pytest_gpu 330 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ."
fi
tar -czf "${OUT:-/tmp}/bwdfinal.tgz" -C "$(dirname "$O")" "$(basename "$O")"
