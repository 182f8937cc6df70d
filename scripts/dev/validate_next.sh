#!/usr/bin/env bash
# First GPU run of branch wip/next-all (main + wip/bwd-next + mla-fp8 + decode-quant-v2), in
# one or two device calls. Here:
#
#   git archive wip/next-all | (rm -rf .carry/next && mkdir -p .carry/next && tar -x -C .carry/next)
#
# then run(carry=[".carry/next"], command="bash .carry/next/scripts/dev/validate_next.sh A")
# and, while the machine is warm, the same with B. Part A (~6 min): install, the three
# changes' quick checks and tests, the sanitizers. Part B (~3 min): timings (backward
# ping-pong deterministic vs v1, quantized decode vs bf16 cache, MLA FP8 vs bf16).
# Everything goes to $OUT/next-<part>.tgz plus a summary; every step has a time limit.
set -u -o pipefail
PART=${1:?usage: validate_next.sh A|B}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=/tmp/next-$PART
mkdir -p "$O"
: > "$O/summary.txt"
export CPLUS_INCLUDE_PATH=${CPLUS_INCLUDE_PATH:-/usr/local/cuda/include/cccl}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16} PYTHONUNBUFFERED=1
S=/usr/local/cuda/bin/compute-sanitizer
step() {
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  if timeout "$limit" "$@" > "$O/$name.log" 2>&1; then
    echo "ok   $name $((SECONDS - t0))s" | tee -a "$O/summary.txt"
  else
    echo "FAIL $name (exit $?) $((SECONDS - t0))s" | tee -a "$O/summary.txt"
  fi
}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
if [ ! -f /tmp/next-installed ]; then
  step install 240 python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$TREE/build/gpu" \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF "$TREE" &&
    touch /tmp/next-installed
fi
cd /tmp
PY="$TREE/tests/python"
if [ "$PART" = A ]; then
  # backward: deterministic mode on the ping-pong kernel (per-warp turns), v1 reading lse early
  step bwd_check 90 python3 "$TREE/scripts/dev/bwd_check.py"
  step bwd_check_v1 90 env FLASHKIT_BWD_SM90_V1=1 python3 "$TREE/scripts/dev/bwd_check.py"
  step racecheck_bwd 200 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck --error-exitcode 1 \
    python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128 256
  step pytest_bwd 200 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py"
  # MLA over the FP8 cache
  step pytest_mla 200 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider -s test_mla_fp8_gpu.py test_mla_gpu.py -k 'not sweep_shape'"
  step memcheck_mla 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 \
    python3 "$TREE/scripts/sanitize_mla.py" --quick
  # quantized decode v2
  step pytest_decode 240 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider test_decode_gpu.py"
  step memcheck_decode 200 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 \
    python3 "$TREE/scripts/sanitize_decode.py" --quick
  for f in "$O"/pytest_*.log; do echo "$(basename "$f"): $(tail -1 "$f")" >> "$O/summary.txt"; done
  grep -h "relative L2" "$O/pytest_mla.log" >> "$O/summary.txt"
  grep -h "ALL OK\|SOME FAILED" "$O"/bwd_check*.log >> "$O/summary.txt"
  for f in "$O"/*check_*.log; do tail -2 "$f" >> "$O/summary.txt"; done
else
  # timings: backward (deterministic now ping-pong), quantized decode, MLA FP8
  step bwd_perf 150 python3 "$TREE/scripts/dev/bwd_check.py" --perf
  step bwd_perf_v1 150 env FLASHKIT_BWD_SM90_V1=1 python3 "$TREE/scripts/dev/bwd_check.py" --perf
  step decode_quant 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --csv "$O/decode-quant.csv"
  step mla_fp8 200 python3 -m flashkit.bench --op mla --quick --impls flashkit flashkit_fp8 --out-dir "$O/mla"
  grep "^D" "$O/bwd_perf.log" | sed 's/^/pp  /' >> "$O/summary.txt"
  grep "^D" "$O/bwd_perf_v1.log" | sed 's/^/v1  /' >> "$O/summary.txt"
  tail -30 "$O/decode_quant.log" >> "$O/summary.txt"
fi
cp "$O/summary.txt" "$OUT/summary-$PART.txt"
tar -czf "$OUT/next-$PART.tgz" -C "$O" .
cat "$O/summary.txt"
