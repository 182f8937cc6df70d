#!/usr/bin/env bash
# Device run: ncu source-level counters (instructions and stall samples per SASS line), warp
# states and speed of light of the Hopper ping-pong backward on one shape (B S H D causal),
# summarized by scripts/dev/ncu_top_stalls.py.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_ncu_source.sh 4 4096 16 128 0")
# KREGEX picks another kernel (e.g. bwd_ks_kernel for D 256).
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdncu
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
step ncu 300 /usr/local/cuda/bin/ncu --section SourceCounters --section WarpStateStats --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
  -k regex:${KREGEX:-bwd_pp_kernel} -s 2 -c 1 -f -o /tmp/rep python3 "$TREE/scripts/dev/bwd_profile_case.py" "$@"
step details 120 bash -c "/usr/local/cuda/bin/ncu -i /tmp/rep.ncu-rep --page details > $O/details.txt"
step export 120 bash -c "/usr/local/cuda/bin/ncu -i /tmp/rep.ncu-rep --page source --csv --print-source sass > /tmp/src.csv"
python3 "$TREE/scripts/dev/ncu_top_stalls.py" /tmp/src.csv > "$O/top_stalls.txt" 2>&1
gzip -c /tmp/src.csv > "$O/src.csv.gz"
tar -czf "${OUT:-/tmp}/bwdncu.tgz" -C "$(dirname "$O")" "$(basename "$O")"
