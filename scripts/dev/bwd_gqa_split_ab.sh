#!/usr/bin/env bash
# Device run of the backward's GQA group split (BwdParams::gqa_split_log2, kernel_pp.cuh;
# docs/kernels/bwd.md "GQA: the group split"), one build:
#   tests   test_backward_gpu.py (-n 6; fast GQA calls split by default), then its deterministic
#           tests again with FLASHKIT_BWD_DET_GQA_SPLIT=1
#   memcheck / racecheck of sanitize_bwd.py --quick --dims 64 128 (its GQA cases split)
#   bench   FA3 sweep D 64 / 128 bwd with --gqa 8, fast and deterministic, env arms
#           s0 (FLASHKIT_BWD_GQA_SPLIT=0: no split), s8 (default), d8 (deterministic split too),
#           ROUNDS (default 2) interleaved, cuDNN in s0's first round; and the MHA sweep once (m8)
#           against results v13 (the split does not apply; the code around it changed)
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
step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_backward_gpu.py
step tests_det_split 200 env FLASHKIT_BWD_DET_GQA_SPLIT=1 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
  test_backward_gpu.py -k "determin"
cd /tmp
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck 200 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128 \
  --allow-det-order
step racecheck 200 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick \
  --dims 64 128 --allow-det-order
unset PYTORCH_NO_CUDA_MEMORY_CACHING
B=(python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --out-dir "$O/bench" --no-plot)
I=(--impls flashkit flashkit_deterministic)
for ((r = 1; r <= ROUNDS; r++)); do
  peers=(); [ "$r" = 1 ] && peers=(sdpa_cudnn)
  step "s0_$r" 200 env FLASHKIT_BWD_GQA_SPLIT=0 "${B[@]}" "${I[@]}" "${peers[@]}" --gqa 8 --tag "s0$r"
  step "s8_$r" 200 "${B[@]}" "${I[@]}" --gqa 8 --tag "s8$r"
  step "d8_$r" 200 env FLASHKIT_BWD_DET_GQA_SPLIT=1 "${B[@]}" --impls flashkit_deterministic --gqa 8 --tag "d8$r"
done
step m8 200 "${B[@]}" "${I[@]}" sdpa_cudnn --tag m81
tar -czf "${OUT:-/tmp}/bwdgs.tgz" -C "$(dirname "$O")" "$(basename "$O")"
