#!/usr/bin/env bash
# Device run of the self-planned split CTAs (kernels/decode/self_plan.cuh): build, the new tests,
# the decode / KV-cache GPU tests, the one-call A/B timing (scripts/dev/decode_self_plan_ab.py) and
# compute-sanitizer memcheck / racecheck / synccheck of sanitize_decode.py --quick (one-call form,
# so self-planned), each also with FLASHKIT_DECODE_SELF_PLAN=verify where it is cheap.
#   run(command="bash scripts/dev/decode_self_plan.sh")      STEPS="build tests ab san" by default
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/selfplan
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"build tests ab san"}
cd /tmp
has() { [[ " $STEPS " == *" $1 "* ]]; }
# (the 8-bit kernels' LDGSTS descriptors are checked by the CTest sass_ldgsts_descriptor on the built
# library; the installed package's _C module carries no device code to scan)
has build && install_tree "$TREE"
if has tests; then
  step new_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider "$TREE/tests/python/test_decode_gpu.py" -k "self_plan"
  step decode_tests 500 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider "$TREE/tests/python/test_decode_gpu.py" \
    "$TREE/tests/python/test_kvcache_gpu.py"
  step decode_tests_verify 500 env FLASHKIT_DECODE_SELF_PLAN=verify python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider \
    "$TREE/tests/python/test_decode_gpu.py" -k "quantized or one_call or compile or mixed or million or out_of_range"
fi
has ab && step ab 300 python3 "$TREE/scripts/dev/decode_self_plan_ab.py" ${AB_ARGS:-}
if has san; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    step $tool 300 $S --tool $tool --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_decode.py" --quick
  done
  step memcheck_verify 300 env FLASHKIT_DECODE_SELF_PLAN=verify $S --tool memcheck --error-exitcode 1 --print-limit 20 \
    python3 "$TREE/scripts/sanitize_decode.py" --quick
fi
cat "$O/summary.txt"
for f in new_tests ab; do [ -f "$O/$f.log" ] && { echo "== $f"; tail -40 "$O/$f.log"; }; done
for f in decode_tests decode_tests_verify; do [ -f "$O/$f.log" ] && { echo "== $f"; tail -5 "$O/$f.log"; }; done
for f in memcheck racecheck synccheck memcheck_verify; do [ -f "$O/$f.log" ] && { echo "== $f"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error:|passed" "$O/$f.log" | sort | uniq -c | head -12; }; done
