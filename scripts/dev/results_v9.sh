#!/usr/bin/env bash
# Device run of the results files after the 2026-11-27 changes (multiply-high tile decode,
# stmatrix staging, d64 windows on the three-warpgroup kernel, the backward's MHA walk).
# STEPS (default "install fwd dims window"):
#   install  build + pip install the tree (sm_90a only)
#   fwd      FA3 sweep D 64/128/256 bf16 with cuDNN and FA2 (tag $FWD_TAG, default v9), fp16 quick with cuDNN
#   dims     the dims sweep (D 96 / 192) with the peers, then with FLASHKIT_FWD_PORTABLE=1
#   window   causal window 4096 against full causal at S 8k / 16k, D 64/128/256, forward and
#            backward (issue 9's window bar)
#   bwd      backward and forward + backward at D 64/128/256 with cuDNN, FA2 and the
#            deterministic mode (tag $BWD_TAG, default bwd-v6)
#   suite    the whole GPU test suite
# Set FLASHKIT_COMMIT to the tree's commit (the device's .git is stale); FWD_TAG / BWD_TAG name the
# results files of a later run (e.g. v10 / bwd-v8); BWD_DIMS limits the bwd step's head dims.
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/results_v9.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/res9
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"install fwd dims window"}
FT=${FWD_TAG:-v9}
BT=${BWD_TAG:-bwd-v6}
BD=${BWD_DIMS:-"64 128 256"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
echo "commit $FLASHKIT_COMMIT" | tee -a "$O/summary.txt"
has install && step install 400 "${INSTALL[@]}"
cd /tmp
if has fwd; then
  step fwd_bf16 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --impls flashkit sdpa_cudnn sdpa_flash \
    --out-dir "$O/bench" --tag $FT --no-plot
  step fwd_fp16 200 python3 -m flashkit.bench --sweep fa3 --quick --dtype fp16 --impls flashkit sdpa_cudnn \
    --out-dir "$O/bench" --tag $FT-fp16 --no-plot
fi
if has dims; then
  step dims 200 python3 -m flashkit.bench --sweep dims --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bench" \
    --tag $FT-dims --no-plot
  step dims_portable 200 env FLASHKIT_FWD_PORTABLE=1 python3 -m flashkit.bench --sweep dims --impls flashkit \
    --out-dir "$O/bench" --tag $FT-dims-portable --no-plot
fi
if has window; then
  step window 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --causal yes --seqlens 8192 16384 \
    --window 4096 --mode fwd bwd --impls flashkit --out-dir "$O/bench" --tag window-$FT --no-plot
fi
if has bwd; then
  step bwd 450 python3 -m flashkit.bench --sweep fa3 --heads-dims $BD --mode bwd fwd_bwd \
    --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag $BT --no-plot
fi
if has suite; then
  step suite 530 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ."
fi
tar -czf "${OUT:-/tmp}/res9.tgz" -C "$(dirname "$O")" "$(basename "$O")"
