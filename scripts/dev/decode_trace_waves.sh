#!/usr/bin/env bash
# Device run: decode timelines (FLASHKIT_DECODE_TRACE build) of the B >= 16 rows with one wave
# of split CTAs (the default plan) and with two (FLASHKIT_DECODE_WAVES=2): how long the drain
# is, how many CTAs stream over time, and whether slow CTAs are slow per SM.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/decode_trace_waves.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/tw
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
sed -i 's/^#pragma once$/#pragma once\n#define FLASHKIT_DECODE_TRACE 1/' "$TREE/src/kernels/decode_params.h"
install_cmd "$TREE"
step install_trace 420 "${INSTALL[@]}"
cd /tmp
CASES=${DECODE_CASES:-"16:8192:32:8:bf16 16:8192:32:8:fp8 64:8192:32:8:bf16 16:16384:32:32:bf16"}
step waves1 240 python3 "$TREE/scripts/dev/decode_trace.py" $CASES
step waves2 240 env FLASHKIT_DECODE_WAVES=2 python3 "$TREE/scripts/dev/decode_trace.py" $CASES
tar -czf "${OUT:-/tmp}/tw.tgz" -C "$(dirname "$O")" "$(basename "$O")"
