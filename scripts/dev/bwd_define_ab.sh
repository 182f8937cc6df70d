#!/usr/bin/env bash
# Device A/B of backward compile-time variants (fwd_define_ab.sh for the backward): each
# argument NAME=DEFINES (';'-separated "MACRO VALUE" pairs prepended as #defines to the
# instantiation files INSTS, default the bf16 D 256 one; empty = as committed), rebuilt
# incrementally and timed on the FA3 sweep (DIMS, bf16, --mode bwd, BENCH_ARGS added) in
# ROUNDS interleaved rounds. The files are restored at the end; the last build is the last
# argument's.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_define_ab.sh old='FLASHKIT_BWD_KS_STATS_ASYNC 0' new=")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwddef
. "$(dirname "$0")/device_steps.sh"
INSTS=${INSTS:-"bwd_sm90_bf16_hd256"}
DIMS=${DIMS:-256}
ROUNDS=${ROUNDS:-2}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
for f in $INSTS; do cp "$TREE/src/kernels/bwd_sm90/inst/$f.cu" "$O/$f.orig"; done
declare -A DEFS
NAMES=()
for v in "$@"; do NAMES+=("${v%%=*}"); DEFS[${v%%=*}]=${v#*=}; done
set_variant() {  # the instantiation files with NAME's defines
  for f in $INSTS; do
    with_defines "$O/$f.orig" "${DEFS[$1]}" > "$TREE/src/kernels/bwd_sm90/inst/$f.cu"
  done
  install_cmd "$TREE"
  step "build_$1$2" 400 "${INSTALL[@]}"
}
for ((r = 1; r <= ROUNDS; r++)); do
  for n in "${NAMES[@]}"; do
    set_variant "$n" "$r"
    (cd /tmp && step "bench_$n$r" 200 python3 -m flashkit.bench --sweep fa3 --heads-dims $DIMS --mode bwd ${BENCH_ARGS:-} \
      --impls flashkit --out-dir "$O/bench" --tag "$n$r" --no-plot)
  done
done
for f in $INSTS; do cp "$O/$f.orig" "$TREE/src/kernels/bwd_sm90/inst/$f.cu"; done
tar -czf "${OUT:-/tmp}/bwddef.tgz" -C "$(dirname "$O")" "$(basename "$O")"
