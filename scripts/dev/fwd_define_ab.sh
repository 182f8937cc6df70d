#!/usr/bin/env bash
# Device A/B of forward compile-time variants: each argument NAME=DEFINES (';'-separated
# "MACRO VALUE" pairs prepended as #defines to the instantiation files INSTS; empty = as
# committed), rebuilt incrementally and timed on the FA3 sweep (DIMS, bf16) in ROUNDS
# interleaved rounds, cuDNN once in the first round. Then CHECK=NAME (default: the second
# argument) is rebuilt and checked: forward and family GPU tests, memcheck and racecheck of
# sanitize_small.py --quick --dims DIMS (CHECKS=0 skips them).
# FAMILY (default fwd_sm90) names the kernel family whose inst/ files get the defines and MODE
# (default fwd) the bench mode, PEERS (default sdpa_cudnn; empty: none) the peers of the first
# round, BENCH_ARGS more bench arguments; bwd_define_ab.sh sets them for the backward (no checks).
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/fwd_define_ab.sh base= bn64='FLASHKIT_FWD_D64_BLOCK_N 64'")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
FAMILY=${FAMILY:-fwd_sm90}
MODE=${MODE:-fwd}
O=${OUT:-/tmp}/${OUT_NAME:-fwddef}
. "$(dirname "$0")/device_steps.sh"
INSTS=${INSTS:-"fwd_sm90_bf16_hd64 fwd_sm90_fp16_hd64"}
DIMS=${DIMS:-64}
ROUNDS=${ROUNDS:-2}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
for f in $INSTS; do cp "$TREE/src/kernels/$FAMILY/inst/$f.cu" "$O/$f.orig"; done
declare -A DEFS
NAMES=()
for v in "$@"; do NAMES+=("${v%%=*}"); DEFS[${v%%=*}]=${v#*=}; done
set_variant() {  # the instantiation files with NAME's defines
  for f in $INSTS; do
    with_defines "$O/$f.orig" "${DEFS[$1]}" > "$TREE/src/kernels/$FAMILY/inst/$f.cu"
  done
  install_cmd "$TREE"
  step "build_$1$2" 400 "${INSTALL[@]}"
}
for ((r = 1; r <= ROUNDS; r++)); do
  for n in "${NAMES[@]}"; do
    set_variant "$n" "$r"
    impls="${IMPLS:-flashkit}"
    [ "$r" = 1 ] && [ "$n" = "${NAMES[0]}" ] && [ -n "${PEERS-sdpa_cudnn}" ] && impls="$impls ${PEERS-sdpa_cudnn}"
    (cd /tmp && step "bench_$n$r" 200 python3 -m flashkit.bench --sweep fa3 --heads-dims $DIMS --mode $MODE \
      ${BENCH_ARGS:-} --impls $impls --out-dir "$O/bench" --tag "$n$r" --no-plot)
  done
done
if [ "${CHECKS:-1}" = 1 ] && [ $# -ge 1 ]; then
  C=${CHECK:-${NAMES[1]:-${NAMES[0]}}}
  set_variant "$C" check
  step "tests_$C" 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step "memcheck_$C" 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims $DIMS
  step "racecheck_$C" 150 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims $DIMS
fi
for f in $INSTS; do restore_inst "$O/$f.orig" "$TREE/src/kernels/$FAMILY/inst/$f.cu"; done
tar -czf "${OUT:-/tmp}/${OUT_NAME:-fwddef}.tgz" -C "$(dirname "$O")" "$(basename "$O")"
