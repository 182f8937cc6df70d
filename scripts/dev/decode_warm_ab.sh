#!/usr/bin/env bash
# Device run: decode timeline of this tree (FLASHKIT_DECODE_TRACE build), then a normal build
# timed with the combine's dry pass off and on in the same binary (FLASHKIT_DECODE_COMBINE_WARM=0
# in the environment), interleaved twice; then the decode GPU tests and the decode sanitizers.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/decode_warm_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/dw
. "$(dirname "$0")/device_steps.sh"
P="$TREE/src/kernels/decode_params.h"
cp "$P" "$O/p.orig"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
sed -i 's/^#pragma once$/#pragma once\n#define FLASHKIT_DECODE_TRACE 1/' "$P"
install_cmd "$TREE"
step install_trace 420 "${INSTALL[@]}"
cd /tmp
step decode_trace 240 python3 "$TREE/scripts/dev/decode_trace.py" ${DECODE_CASES:-1:65536:32:8:fp8 1:65536:32:8:bf16 1:16384:32:8:fp8 16:8192:32:8:fp8}
cp "$O/p.orig" "$P"
cd "$TREE" && step install 420 "${INSTALL[@]}"; cd /tmp
CF=${DECODE_CONFIGS:-"1:65536:32:8 1:16384:32:8 1:8192:32:8 16:8192:32:8 16:4096:32:8"}
for i in 1 2; do
  step decode_cold_$i 200 env FLASHKIT_DECODE_COMBINE_WARM=0 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF --csv "$O/cold$i.csv"
  step decode_warm_$i 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF --csv "$O/warm$i.csv"
done
${EXTRA:-true}
rm -f "$O"/p.orig
tar -czf "${OUT:-/tmp}/dw.tgz" -C "$(dirname "$O")" "$(basename "$O")"
