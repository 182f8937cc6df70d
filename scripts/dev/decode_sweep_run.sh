#!/usr/bin/env bash
# Device run: the SPEC decode sweep with its peers (FlashInfer from .carry/flashinfer, SDPA
# cuDNN/flash on a contiguous copy, the read limit), in parts that each fit one call:
#   A: --batch 1 16     B: --batch 64 128     Q: quantized caches vs bf16 (issue 10 rows)
#   rm -rf .carry/cur && mkdir -p .carry/cur && git archive HEAD | tar -x -C .carry/cur
#   run(carry=[".carry/cur", ".carry/flashinfer"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/decode_sweep_run.sh A")
set -u -o pipefail
PART=${1:?usage: decode_sweep_run.sh A|B|Q}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/sweep-$PART
. "$(dirname "$0")/device_steps.sh"
export FLASHKIT_FLASHINFER_PATH=${FLASHKIT_FLASHINFER_PATH:-/work/main/.carry/flashinfer}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
case $PART in
  A) step sweep 560 python3 -m flashkit.bench --op decode --batch 1 16 --out-dir "$O" --tag b1-16 ;;
  B) step sweep 560 python3 -m flashkit.bench --op decode --batch 64 128 --out-dir "$O" --tag b64-128 ;;
  Q) step quant 300 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs 1:65536:32:8 \
       1:16384:32:8 16:8192:32:8 16:16384:32:32 64:8192:32:8 64:16384:32:8 128:4096:32:8 128:8192:32:8 --csv "$O/quant.csv" ;;
esac
tar -czf "${OUT:-/tmp}/sweep-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
