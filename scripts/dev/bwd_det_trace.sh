#!/usr/bin/env bash
# Device run: a FLASHKIT_BWD_DET_TRACE build (diagnostic only), then per FA3-sweep shape the fast
# and deterministic backward times and the deterministic kernel's turn / release shares
# (scripts/dev/bwd_det_trace.py; summary at the end of trace.log).
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_det_trace.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdtrace
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
sed -i 's/^#define FLASHKIT_BWD_DET_TRACE 0$/#define FLASHKIT_BWD_DET_TRACE 1/' "$TREE/src/kernels/bwd_sm90/kernel_pp.cuh"
grep -c "^#define FLASHKIT_BWD_DET_TRACE 1" "$TREE/src/kernels/bwd_sm90/kernel_pp.cuh" >> "$O/summary.txt"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
step trace 200 python3 "$TREE/scripts/dev/bwd_det_trace.py" ${TRACE_CASES:-}
python3 "$TREE/scripts/dev/bwd_det_trace.py" --summarize "$O/trace.log" | tee -a "$O/summary.txt"
grep "^case" "$O/trace.log" | tee -a "$O/summary.txt"
