#!/usr/bin/env bash
# Device calls prepared in the forty-fourth session (2026-11-29) for the next one, H200 or H100.
#   A: the narrow form for the 16-bit decode caches (FLASHKIT_DECODE_NARROW16=1, environment; decode.md "The narrow
#      form for the 16-bit caches"; its first run, d48c364, faulted with an illegal instruction: an odd LDGSTS
#      descriptor register, fixed in a30060e with the Q-copy wait; not rerun). Install; the decode GPU tests (the whole of
#      test_decode_gpu.py: its new A/B test, and the NaN-poisoned allocations of 893a93d, which run here first),
#      test_kvcache_gpu.py, test_index_hardening_gpu.py -k graph_capture (621fa94), the FP8 MLA Hopper comparisons (they now
#      check which split kernel each arm launched, d3b47cc) and the MLA A/B probes (poisoned, checked, b3ba437; and 893a93d's
#      successors in test_decode_gpu.py); memcheck / racecheck / synccheck of
#      sanitize_decode.py --quick and memcheck of the full case list (D 64 / 128 / 256) with the switch; then ROUNDS (3)
#      interleaved rounds off / on of decode_quick_bench.py --kv bf16 --cudnn at the issue-6 rows where B 16 GQA lags
#      cuDNN, and B 1 / 64 as controls. ~6 min. Prediction: bf16 0..-4 % time at B 16 GQA, 0 at B >= 64.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session46.sh A", timeout_s=600)
#   B (its own script): the D 128 producer warpgroup again, now that its MMA warpgroups compile without spills at 240
#      registers (5c58b63, f898b3f; bwd.md "The producer's MMA warpgroups without spills"; the dS^T tile is stored by
#      stmatrix in that build, so its D 128 tests and sanitizers come first): ~8 min.
#      run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/bwd_producer_ab.sh", timeout_s=600)
#   C: the default D 64 / 96 / 128 backward with dS^T stored by stmatrix (FLASHKIT_BWD_PP_STSM_DS 1, compile-time; bwd.md
#      "The stmatrix dS^T store in the default build": spills 4-32 bytes -> 0, step loops 55-120 instructions shorter).
#      The six hd64 / 96 / 128 files built both ways (pip --target, once each); on the variant the D 64 / 96 / 128
#      backward tests and the family tests, memcheck / racecheck / synccheck of sanitize_bwd.py --quick --dims 64 96
#      128; then ROUNDS (2) interleaved rounds of the FA3 sweep's D 64 / 128 backward, fast and deterministic.
#      ~8 min. Prediction: +0.5..2 % at D 128, +1..3 % at D 64, no row below.
#   Decide from the rounds (the quick bench's CSV: scripts/dev/ab_medians.py works on its rows too when the arms are
#   tagged in the file names): flip the macro default only where no row falls below the rounds' spread; then the
#   decode sweep with the peers (the v16 files) and issue 6's report.
set -u -o pipefail
PARTS=${1:?usage: session46.sh A|C (or AC)}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s46
. "$(dirname "$0")/device_steps.sh"
watchdog_start "${PACK_AT:-560}"
install_tree "$TREE"
if [[ $PARTS == *C* ]]; then
  D=$TREE/src/kernels/bwd_sm90/inst
  inst_variants "$(for t in bf16 fp16; do for d in 64 96 128; do printf '%s ' "$D/bwd_sm90_${t}_hd$d.cu"; done; done)" \
    "base=|st=FLASHKIT_BWD_PP_STSM_DS 1" 400
  (cd "$TREE/tests/python" && PYTHONPATH=/tmp/pkg_st OMP_NUM_THREADS=2 step tests_st 300 python3 -m pytest -q -m gpu \
    -n 6 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py -k "D64 or D96 or D128 or d64 or d96 or d128 or pp")
  sanitizer_steps st "PYTHONPATH=/tmp/pkg_st" "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 96 128
  pack
  for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
    order="base st"; [ $((r % 2)) = 0 ] && order="st base"
    for n in $order; do
      (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "bwd_$n$r" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 \
        --mode bwd --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "c-$n$r" --no-plot)
    done
    pack
  done
fi
if [[ $PARTS == *A* ]]; then
  (cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step test_decode 300 python3 -m pytest -q -m gpu -n 6 \
    -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py)
  (cd "$TREE/tests/python" && step test_hardening 120 python3 -m pytest -q -m gpu -p no:cacheprovider \
    test_index_hardening_gpu.py -k "graph_capture or portable_family")
  (cd "$TREE/tests/python" && step test_mla_fp8_hopper 200 python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider \
    test_mla_fp8_gpu.py test_mla_gpu.py -k "hopper_fp8 or staged_and_direct or tma_copy_paths")
  pack
  sanitizer_steps n16 FLASHKIT_DECODE_NARROW16=1 "$TREE/scripts/sanitize_decode.py" --quick
  grep -h "Race reported" "$O/racecheck_n16.log" | grep -vc nvjet | sed "s/^/racecheck hazards outside cuBLAS's nvjet: /" \
    | tee -a "$O/summary.txt"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 step memcheck_n16_full 200 env FLASHKIT_DECODE_NARROW16=1 $S --tool memcheck \
    --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py"
  pack
  mkdir -p "$O/bench"
  CF="16:8192:32:8 16:4096:32:8 16:8192:64:8 16:16384:32:32 1:16384:32:8 1:65536:32:8 64:8192:32:8"
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    order="off on"; [ $((r % 2)) = 0 ] && order="on off"
    for v in $order; do
      e="FLASHKIT_DECODE_NARROW16=0"; [ $v = on ] && e="FLASHKIT_DECODE_NARROW16=1"
      (cd /tmp && step "dq_$v$r" 120 env $e python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 --cudnn \
        --configs $CF --csv "$O/bench/decode-n16-$v$r.csv")
    done
    pack
  done
fi
pack
watchdog_stop; exit 0
