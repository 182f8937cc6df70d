#!/usr/bin/env bash
# Device run: the deterministic backward's compile-time variants against this tree, interleaved
# twice (FA3 sweep bf16 D 64/128, deterministic mode only): FLASHKIT_BWD_DET_FENCE_SC=1 (the
# fence.sc back in front of each release) and FLASHKIT_BWD_DET_POLL_EARLY=1 (D 128's turn read
# after the softmax); then the FLASHKIT_BWD_DET_TRACE build's turn / release shares
# (scripts/dev/bwd_det_trace.py). Each variant is a copy of the tree with its define set.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_det_variants.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdvar
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
K=src/kernels/bwd_sm90/kernel_pp.cuh
variant() {  # variant NAME MACRO: /tmp/var_NAME = this tree with MACRO set to 1
  rm -rf "/tmp/var_$1" && mkdir -p "/tmp/var_$1"
  (cd "$TREE" && tar --exclude=./build -cf - .) | tar -xf - -C "/tmp/var_$1"
  sed -i "s/^#define $2 0\$/#define $2 1/" "/tmp/var_$1/$K"
  grep -c "^#define $2 1" "/tmp/var_$1/$K" | sed "s/^/$1: $2 set in /" >> "$O/summary.txt"
}
variant fence FLASHKIT_BWD_DET_FENCE_SC
variant early FLASHKIT_BWD_DET_POLL_EARLY
variant trace FLASHKIT_BWD_DET_TRACE
cd /tmp
declare -A TREES=([base]="$TREE" [fence]=/tmp/var_fence [early]=/tmp/var_early)
for r in 1 2; do
  for v in base fence early; do
    install_cmd "${TREES[$v]}"
    step "install_$v$r" 300 "${INSTALL[@]}"
    step "$v$r" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --deterministic \
      --impls flashkit --out-dir "$O/ab" --tag "$v$r"
  done
done
install_cmd /tmp/var_trace
step install_trace 300 "${INSTALL[@]}"
step trace 200 python3 "$TREE/scripts/dev/bwd_det_trace.py" ${TRACE_CASES:-}
python3 "$TREE/scripts/dev/bwd_det_trace.py" --summarize "$O/trace.log" | tee -a "$O/summary.txt"
grep "^case" "$O/trace.log" | tee -a "$O/summary.txt"
tar -czf "${OUT:-/tmp}/bwdvar.tgz" -C "$(dirname "$O")" "$(basename "$O")"
