#!/usr/bin/env bash
# Device run of the Hopper backward at D 96 / 192 (launch_bwd_sm90_padded: D 96 on the ping-pong
# kernel's D 128 tiles, D 192 on the key-split kernel's D 256 tiles; docs/kernels/bwd.md "D 96 and
# 192 on the Hopper kernels"): build, the backward GPU tests (D 96 / 192 first, then all), the
# families tests, compute-sanitizer memcheck / racecheck / synccheck of sanitize_bwd.py at D 96 /
# 192, and the `dims` sweep's backward against cuDNN / FA2 and against the portable family.
#   run(command="bash scripts/dev/bwd_padded.sh")      STEPS="build new all san bench" by default
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/bwdpad
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"build new all san bench"}
cd /tmp
has() { [[ " $STEPS " == *" $1 "* ]]; }
has build && install_tree "$TREE"
if has new; then
  step padded_tests 400 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider "$TREE/tests/python/test_backward_gpu.py" \
    -k "D96 or D192 or gqa_split"
  step families 500 python3 -m pytest -q -m gpu -p no:cacheprovider "$TREE/tests/python/test_backward_families_gpu.py" \
    -k "dispatch or padded or portable"
fi
if has all; then
  step bwd_tests 500 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider "$TREE/tests/python/test_backward_gpu.py"
fi
if has san; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck 300 $S --tool memcheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
    --dims 96 192 --allow-det-order
  for tool in racecheck synccheck; do
    step $tool 300 $S --tool $tool --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
      --quick --dims 96 192 --allow-det-order
  done
  # the portable family alone at D 96 / 192 (its copies' left-over threads idle since this change)
  step racecheck_portable 300 env FLASHKIT_BWD_PORTABLE=1 $S --tool racecheck --error-exitcode 1 --print-limit 20 \
    python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 96 192 --allow-det-order
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
fi
if has pair; then  # D 192 on the pair kernel: its tests, sanitizers with it forced on, and an A/B against the key-split kernel
  step pair_tests 400 python3 -m pytest -q -m gpu -p no:cacheprovider "$TREE/tests/python/test_backward_families_gpu.py" -k "pair"
  step d192_tests 300 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider "$TREE/tests/python/test_backward_gpu.py" -k "D192"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_pair 300 env FLASHKIT_BWD_KS_PAIR=1 $S --tool memcheck --error-exitcode 1 --print-limit 20 \
    python3 "$TREE/scripts/sanitize_bwd.py" --dims 192 --allow-det-order
  step racecheck_pair 300 env FLASHKIT_BWD_KS_PAIR=1 $S --tool racecheck --error-exitcode 1 --print-limit 20 \
    python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 192 --allow-det-order
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  for r in 1 2; do
    for v in 0 1; do
      step ab_pair${v}_r$r 200 env FLASHKIT_BWD_KS_PAIR=$v python3 -m flashkit.bench --sweep dims --heads-dims 192 \
        --mode bwd --impls flashkit flashkit_deterministic --out-dir "$O/ab" --tag pair$v-r$r
    done
  done
  for f in "$O"/ab/prefill-*.csv; do echo "== $f"; grep ",bwd," "$f" | cut -d, -f2,9,11,14; done
fi
if has suite; then  # after the last kernel edit: D 192's long-key defaults, then every GPU test file but the families one
  step long_keys 200 python3 -m pytest -q -m gpu -p no:cacheprovider "$TREE/tests/python/test_backward_gpu.py" \
    -k "d192_long or long_keys"
  step suite 470 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider "$TREE/tests/python" \
    --ignore="$TREE/tests/python/test_backward_families_gpu.py"
fi
if has bench; then
  step bench 400 python3 -m flashkit.bench --sweep dims --mode bwd fwd_bwd \
    --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O" --tag dims-bwd
  step bench_portable 300 env FLASHKIT_BWD_PORTABLE=1 python3 -m flashkit.bench --sweep dims --mode bwd \
    --impls flashkit --out-dir "$O" --tag dims-bwd-portable
fi
cat "$O/summary.txt"
for f in padded_tests families bwd_tests pair_tests d192_tests long_keys suite; do [ -f "$O/$f.log" ] && { echo "== $f"; tail -12 "$O/$f.log"; }; done
for f in memcheck racecheck synccheck racecheck_portable memcheck_pair racecheck_pair; do [ -f "$O/$f.log" ] && { echo "== $f"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error:|cases passed" "$O/$f.log" | sort | uniq -c | head -12; }; done
for f in "$O"/prefill-*.csv; do [ -f "$f" ] && { echo "== $f"; grep -E ",bwd,|,fwd_bwd," "$f" | cut -d, -f2,4,9,11,12,14; }; done
