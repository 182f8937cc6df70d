#!/usr/bin/env bash
# Device run: the decode timeline of this tree (FLASHKIT_DECODE_TRACE build), then a normal
# build and the forward's TMA-store epilogue against thread stores in the same binary
# (FLASHKIT_FWD_TMA_STORE=0 in the environment), interleaved twice, D 128 FA3 sweep.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/trace3.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/t3
. "$(dirname "$0")/device_steps.sh"
P="$TREE/src/kernels/decode_params.h"
cp "$P" "$O/p.orig"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
sed -i 's/^#pragma once$/#pragma once\n#define FLASHKIT_DECODE_TRACE 1/' "$P"
install_cmd "$TREE"
step install_trace 420 "${INSTALL[@]}"
cd /tmp
step decode_trace 240 python3 "$TREE/scripts/dev/decode_trace.py" ${DECODE_CASES:-1:65536:32:8:fp8 1:16384:32:8:fp8 16:8192:32:8:fp8}
cp "$O/p.orig" "$P"
cd "$TREE" && step install 420 "${INSTALL[@]}"; cd /tmp
for i in 1 2; do
  step fwd_threads_$i 200 env FLASHKIT_FWD_TMA_STORE=0 python3 -m flashkit.bench --sweep fa3 --heads-dims ${FWD_DIMS:-128} --impls flashkit --out-dir "$O/bench" --tag threads$i --no-plot
  step fwd_tma_$i 200 python3 -m flashkit.bench --sweep fa3 --heads-dims ${FWD_DIMS:-128} --impls flashkit --out-dir "$O/bench" --tag tma$i --no-plot
done
${EXTRA:-true}
rm -f "$O"/p.orig
tar -czf "${OUT:-/tmp}/t3.tgz" -C "$(dirname "$O")" "$(basename "$O")"
