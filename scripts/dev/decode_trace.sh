#!/usr/bin/env bash
# Device run: one build with FLASHKIT_DECODE_TRACE and FLASHKIT_FWD_TRACE defined (both
# diagnostics only: the kernels record %globaltimer points), then the decode timeline
# (scripts/dev/decode_trace.py) and the persistent forward's per-tile timeline
# (scripts/dev/fwd_trace.py) on the short rows.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/decode_trace.sh")
# DECODE_ONLY=1: the decode trace alone (the forward kernels keep their normal build).
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/trace
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
sed -i 's/^#pragma once$/#pragma once\n#define FLASHKIT_DECODE_TRACE 1/' "$TREE/src/kernels/decode_params.h"
if [ "${DECODE_ONLY:-0}" != 1 ]; then
  sed -i 's/^#define FLASHKIT_FWD_TRACE 0$/#define FLASHKIT_FWD_TRACE 1/' "$TREE/src/kernels/fwd_sm90/kernel_persistent.cuh"
fi
grep -c "FLASHKIT_DECODE_TRACE 1\|FLASHKIT_FWD_TRACE 1" "$TREE/src/kernels/decode_params.h" "$TREE/src/kernels/fwd_sm90/kernel_persistent.cuh" >> "$O/summary.txt"
install_cmd "$TREE"
step install 420 "${INSTALL[@]}"
cd /tmp
step decode_trace 240 python3 "$TREE/scripts/dev/decode_trace.py" ${DECODE_CASES:-}
if [ "${DECODE_ONLY:-0}" != 1 ]; then
  for c in "128 512 0" "128 512 1" "128 1024 1" "64 512 0" "128 16384 0"; do
    step "fwd_trace_${c// /_}" 120 python3 "$TREE/scripts/dev/fwd_trace.py" $c
  done
fi
tar -czf "${OUT:-/tmp}/trace.tgz" -C "$(dirname "$O")" "$(basename "$O")"
