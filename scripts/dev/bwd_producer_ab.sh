#!/usr/bin/env bash
# Device run (prepared 2026-11-29, not run yet): the D 128 producer-warpgroup prototype of the Hopper backward
# (FLASHKIT_BWD_PP_PRODUCER 1 in the D 128 instantiation files; pp_traits.cuh kProducer; docs/kernels/bwd.md
# "A producer warpgroup at D 128"). Builds main as is and the variant (define_variant, pip --target /tmp/pkg_prod),
# checks the variant (the D 128 backward GPU tests, memcheck / racecheck / synccheck of sanitize_bwd.py --quick
# --dims 128), then ROUNDS (default 2) interleaved rounds of the FA3 sweep's D 128 backward, fast and deterministic,
# both masks, main against the variant (cuDNN in main's first round). Output $OUT/bwdprod.tgz.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/bwd_producer_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdprod
. "$(dirname "$0")/device_steps.sh"
pack() { tar -czf "${OUT:-/tmp}/bwdprod.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
install_tree "$TREE"; pack
VARIANT_INST_DIR=bwd_sm90/inst define_variant "$TREE" /tmp/prodtree "FLASHKIT_BWD_PP_PRODUCER 1" \
  "bwd_sm90_bf16_hd128 bwd_sm90_fp16_hd128" /tmp/pkg_prod; pack
P=(env PYTHONPATH=/tmp/pkg_prod)
if [ -z "${SKIP_CHECKS:-}" ]; then
  (cd /tmp && step tests_prod 300 "${P[@]}" python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider \
    "$TREE/tests/python/test_backward_gpu.py" -k "D128")
  tail -n 1 "$O/tests_prod.log" >> "$O/summary.txt"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    (cd /tmp && step ${tool}_prod 240 "${P[@]}" $S --tool $tool --error-exitcode 1 --print-limit 30 \
      python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 128)
    tail -n 2 "$O/${tool}_prod.log" >> "$O/summary.txt"
  done
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  pack
fi
B=(python3 -m flashkit.bench --mode bwd --sweep fa3 --heads-dims 128 --no-plot)
for r in $(seq 1 ${ROUNDS:-2}); do
  peers=""; [ "$r" = 1 ] && peers="sdpa_cudnn"
  (cd /tmp && step main_$r 200 "${B[@]}" --impls flashkit flashkit_deterministic $peers --out-dir "$O/main_$r"); pack
  (cd /tmp && step prod_$r 200 "${P[@]}" "${B[@]}" --impls flashkit flashkit_deterministic --out-dir "$O/prod_$r"); pack
done
