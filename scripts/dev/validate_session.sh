#!/usr/bin/env bash
# Device validation of the 2026-11-26 session (decode v10, wide forward wgmmas, wide bwd dK/dV
# wgmmas), in parts that fit one call each:
#   A: install; the whole GPU pytest suite; backward FA3 sweep (D 64/128, cuDNN) with the
#      wide dK/dV wgmmas, then rebuilt with FLASHKIT_BWD_WIDE_WGMMA=0 and timed again.
#   B: install; memcheck / racecheck of the small forward, backward and decode cases; the
#      forward FA3 sweep (bf16, D 64/128/256) with SDPA cuDNN and flash for bench/results.
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/validate_session.sh A")
set -u -o pipefail
PART=${1:?usage: validate_session.sh A|B}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/sess-$PART
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install 300 "${INSTALL[@]}"
cd /tmp
if [ "$PART" = A ]; then
  step pytest_gpu 330 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ."
  step bwd_wide 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag bwd-wide
  K="$TREE/src/kernels/bwd_sm90/kernel_pp.cuh"
  sed -i 's/^#define FLASHKIT_BWD_WIDE_WGMMA 1/#define FLASHKIT_BWD_WIDE_WGMMA 0/' "$K"
  (cd "$TREE" && step install_bwd_n64 300 "${INSTALL[@]}")
  step bwd_n64 120 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --impls flashkit --out-dir "$O/bench" --tag bwd-n64
  sed -i 's/^#define FLASHKIT_BWD_WIDE_WGMMA 0/#define FLASHKIT_BWD_WIDE_WGMMA 1/' "$K"
else
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_fwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
  step racecheck_fwd 150 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
  step memcheck_bwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick
  step racecheck_bwd 200 $S --tool racecheck --print-limit 50 python3 "$TREE/scripts/sanitize_bwd.py" --quick
  step memcheck_decode 120 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  step fwd_bench 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag fwd-bf16
fi
rm -f "$O"/*.pt
tar -czf "${OUT:-/tmp}/sess-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
