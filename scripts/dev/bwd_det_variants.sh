#!/usr/bin/env bash
# Device run: the backward's compile-time variants against this tree, interleaved twice (FA3
# sweep bf16 D 64/128, the modes of MODES), then (TRACE=1, the default) the
# FLASHKIT_BWD_DET_TRACE build's turn / release shares (scripts/dev/bwd_det_trace.py). Each
# variant is a copy of the tree with its defines set (kernel_pp.cuh, pp_traits.cuh):
#   fence     FLASHKIT_BWD_DET_FENCE_SC=1      the fence.sc back in front of each release
#   (early / lag2, measured slower on 2026-11-26, were removed from the kernel: bwd.md)
#   (alt, D 64's dQ writer alternating by row block, measured neutral on 2026-11-26: removed)
# MODES="det" (default) times the deterministic mode; "fast det" both, "fast" the fast one.
# VARIANTS="fence" (default) picks them; ~50 s of build each, 20 s per sweep.
# RESIDENCY=0 skips the residency test run first on this tree.
# ROUNDS=0: no sweeps, only the trace build (TRACE_CASES="D S causal ..." narrows its shapes).
#   run(carry=[".carry/cur"], command="[VARIANTS='...'] [ROUNDS=0] [TRACE=0] bash .carry/cur/scripts/dev/bwd_det_variants.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdvar
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
KS="src/kernels/bwd_sm90/kernel_pp.cuh src/kernels/bwd_sm90/pp_traits.cuh"
declare -A DEFS=([fence]="FLASHKIT_BWD_DET_FENCE_SC=1"
                 [trace]="FLASHKIT_BWD_DET_TRACE=1")
variant() {  # variant NAME: /tmp/var_NAME = this tree with NAME's defines
  rm -rf "/tmp/var_$1" && mkdir -p "/tmp/var_$1"
  (cd "$TREE" && tar --exclude=./build -cf - .) | tar -xf - -C "/tmp/var_$1"
  for d in ${DEFS[$1]}; do
    for k in $KS; do sed -i "s/^#define ${d%=*} [0-9]*\$/#define ${d%=*} ${d#*=}/" "/tmp/var_$1/$k"; done
    (cd "/tmp/var_$1" && cat $KS) | grep -c "^#define ${d%=*} ${d#*=}\$" | sed "s/^/$1: ${d} set in /" >> "$O/summary.txt"
  done
}
VARS=(${VARIANTS:-fence})
ROUNDS=${ROUNDS:-2}
[ "$ROUNDS" = 0 ] && VARS=()
declare -A TREES=([base]="$TREE")
for v in "${VARS[@]}"; do variant "$v"; TREES[$v]=/tmp/var_$v; done
cd /tmp
if [ "${RESIDENCY:-1}" = 1 ]; then  # the base tree's residency test (the give-up bound) first
  install_cmd "$TREE"
  step install_base0 300 "${INSTALL[@]}"
  step residency 120 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider -rA test_bwd_det_residency_gpu.py"
fi
for ((r = 1; r <= ROUNDS; r++)); do
  for v in base "${VARS[@]}"; do
    install_cmd "${TREES[$v]}"
    step "install_$v$r" 300 "${INSTALL[@]}"
    for m in ${MODES:-det}; do
      step "$v$r$m" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd \
        $([ "$m" = det ] && echo --deterministic) --impls flashkit --out-dir "$O/ab" --tag "$v$r$m"
    done
  done
done
if [ "${TRACE:-1}" = 1 ]; then
  variant trace
  install_cmd /tmp/var_trace
  step install_trace 300 "${INSTALL[@]}"
  step trace 200 python3 "$TREE/scripts/dev/bwd_det_trace.py" ${TRACE_CASES:-}
  python3 "$TREE/scripts/dev/bwd_det_trace.py" --summarize "$O/trace.log" | tee -a "$O/summary.txt"
  grep "^case" "$O/trace.log" | tee -a "$O/summary.txt"
fi
tar -czf "${OUT:-/tmp}/bwdvar.tgz" -C "$(dirname "$O")" "$(basename "$O")"
