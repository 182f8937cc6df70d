#!/usr/bin/env bash
# Device run: install this tree, the MLA GPU tests, compute-sanitizer on the MLA cases, then
# the MLA sweep against the prebuilt FlashMLA (.carry/flashmla_built). STEPS picks a subset
# (default "install tests sanitize bench"); BENCH_ARGS adds sweep options.
#   run(carry=[".carry/flashmla_built"], command="bash scripts/dev/mla_validate.sh")
set -u -o pipefail
R=$PWD
O=${OUT:-/tmp}/val
. "$R/scripts/dev/device_steps.sh"
STEPS=${STEPS:-install tests sanitize bench}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
install_cmd "$R"
has install && step install 420 "${INSTALL[@]}"
cd /tmp
if has tests; then
  step mla_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider "$R/tests/python/test_mla_gpu.py" \
    "$R/tests/python/test_mla_fp8_gpu.py"
  tail -3 "$O/mla_tests.log"
fi
if has sanitize; then
  S=/usr/local/cuda/bin/compute-sanitizer
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 step memcheck_mla 300 $S --tool memcheck --error-exitcode 1 --print-limit 50 \
    python3 "$R/scripts/sanitize_mla.py"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 step racecheck_mla 300 $S --tool racecheck --error-exitcode 1 --print-limit 50 \
    python3 "$R/scripts/sanitize_mla.py" --quick
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 step synccheck_mla 300 $S --tool synccheck --error-exitcode 1 --print-limit 50 \
    python3 "$R/scripts/sanitize_mla.py" --quick
  tail -4 "$O"/memcheck_mla.log "$O"/racecheck_mla.log "$O"/synccheck_mla.log
fi
if has bench; then
  export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-$(git -C "$R" rev-parse --short HEAD 2>/dev/null || echo unknown)}
  step bench 540 python3 -m flashkit.bench --op mla --flashmla-path "$R/.carry/flashmla_built" --out-dir "$O/bench" \
    ${BENCH_ARGS:-}
  tail -60 "$O/bench.log"
fi
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/val.tgz" -C "$(dirname "$O")" "$(basename "$O")"
