#!/usr/bin/env bash
# Device run: the ping-pong backward's step timeline (FLASHKIT_BWD_PP_TRACE=1 build of the bf16
# D 64 / 128 instantiations; scripts/dev/bwd_pp_trace.py), fast mode at S 4k / 16k, causal and
# not, plus D 128 deterministic at 4k (SHAPES overrides); then the build is put back. ~3 minutes.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_pp_trace.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/pptrace
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
INSTS="bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128"
for f in $INSTS; do cp "$TREE/src/kernels/bwd_sm90/inst/$f.cu" "$O/$f.orig"; done
for f in $INSTS; do with_defines "$O/$f.orig" "FLASHKIT_BWD_PP_TRACE 1" > "$TREE/src/kernels/bwd_sm90/inst/$f.cu"; done
step install 400 "${INSTALL[@]}"
cd /tmp
# SHAPES: "D S causal [deterministic [VAR=VALUE]]" entries; each run is summarized on its own (a
# deterministic run prints the same shape key as the fast one). The fifth field, if any, is an
# environment assignment for that run (e.g. FLASHKIT_BWD_D64_M128=0: D 64's 64-row kernel).
SHAPES=${SHAPES:-"128:4096:0 128:16384:0 128:4096:1 128:16384:1 64:4096:0 64:16384:0 64:16384:1 128:4096:0:1"}
for sh in $SHAPES; do
  IFS=: read -r d s c det ev <<< "$sh"
  shape="$d $s $c ${det:-}" n=$(echo $sh | tr ':=' __)
  step "run_$n" 120 env ${ev:-FLASHKIT_TRACE_UNUSED=1} python3 "$TREE/scripts/dev/bwd_pp_trace.py" run $shape
  cat "$O/run_$n.log" >> "$O/trace.log"
  { echo "== run $shape ${ev:-}"; python3 "$TREE/scripts/dev/bwd_pp_trace.py" summarize "$O/run_$n.log" 2>&1; } >> "$O/trace_summary.txt"
done
cat "$O/trace_summary.txt" >> "$O/summary.txt"
for f in $INSTS; do restore_inst "$O/$f.orig" "$TREE/src/kernels/bwd_sm90/inst/$f.cu"; done
tar -czf "${OUT:-/tmp}/pptrace.tgz" -C "$(dirname "$O")" "$(basename "$O")"
