#!/usr/bin/env bash
# Device run of the Hopper MLA kernel's FP8 path (sm90_kernel.cuh Traits::kFp8; mla.md "FP8 cache on the
# Hopper kernel"): install; STEPS (default "tests san bench"):
#   tests  test_mla_fp8_gpu.py (TEST_K a -k filter), then test_mla_gpu.py if FULL=1;
#   san    memcheck / racecheck / synccheck of sanitize_mla.py --quick (its FP8 page-64 case runs the converters);
#   bench  the MLA quick matrix (BENCH_ARGS), flashkit bf16 and FP8 (Hopper), then FP8 on the portable kernel
#          (FLASHKIT_MLA_FP8_PORTABLE=1); FlashMLA too where .carry/flashmla_built was carried.
#   run(command="bash scripts/dev/mla_fp8_sm90.sh", carry=[".carry/flashmla_built"])
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/mlafp8
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
cd /tmp
FM=()
[ -d "$TREE/.carry/flashmla_built" ] && FM=(--flashmla-path "$TREE/.carry/flashmla_built")
for s in ${STEPS:-tests san bench}; do
  case $s in
  tests)
    step fp8_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ${TEST_K:+-k "$TEST_K"} \
      "$TREE/tests/python/test_mla_fp8_gpu.py"
    tail -3 "$O/fp8_tests.log"
    if [ "${FULL:-0}" = 1 ]; then
      step mla_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider "$TREE/tests/python/test_mla_gpu.py"
      tail -3 "$O/mla_tests.log"
    fi ;;
  san)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck synccheck; do
      step $tool 240 $S --tool $tool --error-exitcode 1 --print-limit 50 python3 "$TREE/scripts/sanitize_mla.py" --quick ${SAN_ARGS:-}
      tail -2 "$O/$tool.log"
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING ;;
  bench)
    step bench_sm90 240 python3 -m flashkit.bench --op mla --quick --impls flashkit flashkit_fp8 "${FM[@]}" \
      ${BENCH_ARGS:-} --out-dir "$O/bench" --tag sm90 --no-plot
    step bench_portable 240 env FLASHKIT_MLA_FP8_PORTABLE=1 python3 -m flashkit.bench --op mla --quick \
      --impls flashkit_fp8 ${BENCH_ARGS:-} --out-dir "$O/bench" --tag portable --no-plot
    grep -h "flashkit\|flashmla" "$O"/bench_*.log | grep -v "^#" | tail -60 ;;
  esac
done
cat "$O/summary.txt"
