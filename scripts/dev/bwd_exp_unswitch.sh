#!/usr/bin/env bash
# Device run (2026-11-27, fifteenth session): FLASHKIT_BWD_EXP_UNSWITCH (kernel_pp.cuh), one
# round: the tree as committed (p0) against the bf16 D 64 / D 128 instantiations built with the
# switch (p1), FA3 sweep bwd D 64 / 128, fast and deterministic; then the D 64 / D 128 bf16
# backward tests on p1 (masked tiles: causal, odd lengths, varlen, poisoned outputs); the
# instantiation files are restored and their objects deleted at the end.
#   run(command="bash scripts/dev/bwd_exp_unswitch.sh")   output unsw.tgz
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/unsw
. "$(dirname "$0")/device_steps.sh"
INSTS=${INSTS:-"bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128"}
IMPLS=${IMPLS:-"flashkit flashkit_deterministic"}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
for f in $INSTS; do cp "$TREE/src/kernels/bwd_sm90/inst/$f.cu" "$O/$f.orig"; done
install_cmd "$TREE"
bench() {
  (cd /tmp && step "bench_$1" 120 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd \
    --impls $IMPLS --out-dir "$O/bench" --tag "$1" --no-plot)
}
step install 300 "${INSTALL[@]}"
bench p01
for f in $INSTS; do with_defines "$O/$f.orig" "FLASHKIT_BWD_EXP_UNSWITCH 1" > "$TREE/src/kernels/bwd_sm90/inst/$f.cu"; done
step build_p1 300 "${INSTALL[@]}"
bench p11
step tests_p1 150 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
  test_backward_gpu.py -k 'bf16 and (D64 or D128)'"
tail -3 "$O/tests_p1.log" >> "$O/summary.txt"
for f in $INSTS; do restore_inst "$O/$f.orig" "$TREE/src/kernels/bwd_sm90/inst/$f.cu"; done
python3 "$TREE/scripts/dev/ab_ratios.py" "$O/bench" p0 p1 | tee -a "$O/summary.txt"
tar -czf "${OUT:-/tmp}/unsw.tgz" -C "$(dirname "$O")" "$(basename "$O")"
