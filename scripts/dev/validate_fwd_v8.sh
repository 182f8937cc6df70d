#!/usr/bin/env bash
# Device run of the forward after d64's three-warpgroup kernel (fwd_sm90.md): STEPS
#   install  build + pip install the tree (sm_90a only)
#   bench    FA3 sweep D 64/128/256 bf16 with cuDNN and FA2 (tag v8), fp16 quick set with cuDNN
#   dims     the dims sweep (D 96 / 192) with the peers, then with FLASHKIT_FWD_PORTABLE=1
#   sanitize memcheck / racecheck / synccheck of sanitize_small.py --quick, every d64 call on
#            the three-warpgroup kernel (FLASHKIT_FWD_D64_WG3=1)
#   suite    the whole GPU test suite
#   run(command="STEPS='install bench sanitize' bash scripts/dev/validate_fwd_v8.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/fwdv8
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"install bench sanitize"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
export FLASHKIT_COMMIT=$(cd "$TREE" && git rev-parse --short HEAD 2>/dev/null)
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
echo "commit $FLASHKIT_COMMIT" | tee -a "$O/summary.txt"
has install && step install 400 "${INSTALL[@]}"
cd /tmp
if has bench; then
  step bench_bf16 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --impls flashkit sdpa_cudnn sdpa_flash \
    --out-dir "$O/bench" --tag v8
  step bench_fp16 200 python3 -m flashkit.bench --sweep fa3 --quick --dtype fp16 --impls flashkit sdpa_cudnn \
    --out-dir "$O/bench" --tag v8-fp16 --no-plot
fi
if has dims; then  # D 96 / 192 (16k tokens, 16 heads) with the peers, then the portable family
  step bench_dims 200 python3 -m flashkit.bench --sweep dims --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bench" \
    --tag v8-dims --no-plot
  step bench_dims_portable 200 env FLASHKIT_FWD_PORTABLE=1 python3 -m flashkit.bench --sweep dims --impls flashkit \
    --out-dir "$O/bench" --tag v8-dims-portable --no-plot
fi
if has sanitize; then
  for tool in memcheck racecheck synccheck; do
    step "$tool" 200 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 FLASHKIT_FWD_D64_WG3=1 $S --tool $tool --error-exitcode 1 \
      python3 "$TREE/scripts/sanitize_small.py" --quick
  done
fi
if has suite; then
  step suite 500 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ."
fi
tar -czf "${OUT:-/tmp}/fwdv8.tgz" -C "$(dirname "$O")" "$(basename "$O")"
