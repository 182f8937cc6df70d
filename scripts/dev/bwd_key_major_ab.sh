#!/usr/bin/env bash
# Device A/B of the backward's key-major launch order (BwdParams::key_major, docs/kernels/bwd.md
# "Key-major launch order"), one build, env arms in ROUNDS (default 2) interleaved rounds:
#   e0  FLASHKIT_BWD_KEY_MAJOR=0 FLASHKIT_BWD_DET_KEY_MAJOR=0 (the grid's order)
#   e1  FLASHKIT_BWD_KEY_MAJOR=1 FLASHKIT_BWD_DET_KEY_MAJOR=1 (key-major, fast and deterministic)
# on the FA3 sweep D 64 / 128 (e0: causal and not; e1: causal) and on its GQA 8 form (causal),
# fast and deterministic; then c0, a rebuild of the D 64 / 128 instantiations with
# FLASHKIT_BWD_KEY_MAJOR_REMAP 0 (the remap compiled out: its register cost, against e0), on the
# FA3 sweep. cuDNN once, in e0's first round. Output $OUT/bwdkm.tgz.
#   run(command="bash scripts/dev/bwd_key_major_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdkm
. "$(dirname "$0")/device_steps.sh"
ROUNDS=${ROUNDS:-2}
INSTS="bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
install_cmd "$TREE"
step install 400 "${INSTALL[@]}"
cd /tmp
B=(python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --out-dir "$O/bench" --no-plot)
I=(--impls flashkit flashkit_deterministic)
for ((r = 1; r <= ROUNDS; r++)); do
  peers=(); [ "$r" = 1 ] && peers=(sdpa_cudnn)
  step "e0_mha$r" 200 env FLASHKIT_BWD_KEY_MAJOR=0 FLASHKIT_BWD_DET_KEY_MAJOR=0 "${B[@]}" "${I[@]}" "${peers[@]}" --tag "e0$r"
  step "e0_gqa$r" 200 env FLASHKIT_BWD_KEY_MAJOR=0 FLASHKIT_BWD_DET_KEY_MAJOR=0 "${B[@]}" "${I[@]}" "${peers[@]}" \
    --gqa 8 --causal yes --tag "g0$r"
  step "e1_mha$r" 200 env FLASHKIT_BWD_KEY_MAJOR=1 FLASHKIT_BWD_DET_KEY_MAJOR=1 "${B[@]}" "${I[@]}" --causal yes --tag "e1$r"
  step "e1_gqa$r" 200 env FLASHKIT_BWD_KEY_MAJOR=1 FLASHKIT_BWD_DET_KEY_MAJOR=1 "${B[@]}" "${I[@]}" --gqa 8 --causal yes \
    --tag "g1$r"
done
for f in $INSTS; do
  cp "$TREE/src/kernels/bwd_sm90/inst/$f.cu" "$O/$f.orig"
  with_defines "$O/$f.orig" "FLASHKIT_BWD_KEY_MAJOR_REMAP 0" > "$TREE/src/kernels/bwd_sm90/inst/$f.cu"
done
install_cmd "$TREE"
step build_c0 400 "${INSTALL[@]}"
for ((r = 1; r <= ROUNDS; r++)); do
  step "c0_mha$r" 200 "${B[@]}" "${I[@]}" --tag "c0$r"
done
for f in $INSTS; do restore_inst "$O/$f.orig" "$TREE/src/kernels/bwd_sm90/inst/$f.cu"; done
tar -czf "${OUT:-/tmp}/bwdkm.tgz" -C "$(dirname "$O")" "$(basename "$O")"
