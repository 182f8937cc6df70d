#!/usr/bin/env bash
# Device run of the backward's GQA group split (kernel_pp.cuh's kSplit instantiations,
# BwdParams::gqa_split_log2; docs/kernels/bwd.md "GQA: the group split"), one build:
#   tests   test_backward_gpu.py and test_backward_families_gpu.py -k gqa_split (the latter: the
#           sanitize set with FLASHKIT_BWD_GQA_SPLIT=8, and test_gqa_split_grads with =8 and =0)
#   memcheck / racecheck of sanitize_bwd.py --quick --dims 64 128 with FLASHKIT_BWD_GQA_SPLIT=8
#   bench   FA3 sweep D 64 / 128 bwd with --gqa 8, fast and deterministic, env arms in ROUNDS
#           (default 2) interleaved rounds: s0 (FLASHKIT_BWD_GQA_SPLIT=0: never), dw (=t: the default
#           table of src/launch/bwd_gqa_split.h; until b2eee28 this arm was =w, the old window of clusters of 8), s2 / s4 (=2 / =4: clusters of 2 / 4 wherever the group allows); cuDNN in s0's
#           first round
# Output $OUT/bwdgs.tgz.   run(command="bash scripts/dev/bwd_gqa_split_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdgs
. "$(dirname "$0")/device_steps.sh"
ROUNDS=${ROUNDS:-2}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
install_cmd "$TREE"
step install 400 "${INSTALL[@]}"
cd "$TREE/tests/python"
step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_backward_gpu.py \
  test_backward_families_gpu.py -k "gqa_split"
cd /tmp
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck; do
  step "$tool" 200 env FLASHKIT_BWD_GQA_SPLIT=8 $S --tool $tool --error-exitcode 1 python3 \
    "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128 --allow-det-order
done
unset PYTORCH_NO_CUDA_MEMORY_CACHING
B=(python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --gqa 8 --out-dir "$O/bench" --no-plot)
I=(--impls flashkit flashkit_deterministic)
for ((r = 1; r <= ROUNDS; r++)); do
  peers=(); [ "$r" = 1 ] && peers=(sdpa_cudnn)
  step "s0_$r" 200 env FLASHKIT_BWD_GQA_SPLIT=0 "${B[@]}" "${I[@]}" "${peers[@]}" --tag "s0$r"
  step "dw_$r" 200 env FLASHKIT_BWD_GQA_SPLIT=t "${B[@]}" "${I[@]}" --tag "dw$r"
  step "s2_$r" 200 env FLASHKIT_BWD_GQA_SPLIT=2 "${B[@]}" "${I[@]}" --tag "s2$r"
  step "s4_$r" 200 env FLASHKIT_BWD_GQA_SPLIT=4 "${B[@]}" "${I[@]}" --tag "s4$r"
done
tar -czf "${OUT:-/tmp}/bwdgs.tgz" -C "$(dirname "$O")" "$(basename "$O")"
