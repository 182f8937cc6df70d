#!/usr/bin/env bash
# Device run: the PDL trigger points of the decode kernels (FLASHKIT_DECODE_EARLY_TRIGGER in
# src/kernels/decode_params.h, rebuilt incrementally per variant), timed with
# scripts/decode_quick_bench.py (graph replay), incl. tiny lengths that show the fixed cost.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/decode_trigger_sweep.sh '0 1 3'")
set -u -o pipefail
VARIANTS=${1:-"0 1 3"}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/trig
. "$(dirname "$0")/device_steps.sh"
H="$TREE/src/kernels/decode_params.h"
cp "$H" "$O/params.orig"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
CF="16:64:32:8 1:64:32:8 1:16384:32:8 1:65536:32:8 16:4096:32:8 16:8192:32:8 64:1024:32:8"
for v in $VARIANTS; do
  sed "s/^#define FLASHKIT_DECODE_EARLY_TRIGGER .*/#define FLASHKIT_DECODE_EARLY_TRIGGER $v/" "$O/params.orig" > "$H"
  install_cmd "$TREE"
  step install_$v 300 "${INSTALL[@]}"
  (cd /tmp && step bench_$v 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --configs $CF --csv "$O/trig-$v.csv")
  [ "$v" = "${TESTS_FOR:-3}" ] && (cd /tmp && step tests_$v 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py")
done
cp "$O/params.orig" "$H"
tar -czf "${OUT:-/tmp}/trig.tgz" -C "$(dirname "$O")" "$(basename "$O")"
