#!/usr/bin/env bash
# First GPU run of branch wip/next-all (main + wip/bwd-next + mla-fp8 + decode-quant-v2 +
# wip/fwd-tma + the ping-pong backward's TMA loads), in four device calls while the
# machine stays warm. Here:
#
#   git archive wip/next-all | (rm -rf .carry/next && mkdir -p .carry/next && tar -x -C .carry/next)
#
# then run(carry=[".carry/next"], command="bash .carry/next/scripts/dev/validate_next.sh A"),
# then B, C and D (each call under 10 minutes; the install is kept while the machine stays
# warm, redone otherwise). A (~5 min): install; backward checks, racecheck, tests. B (~5
# min): forward tests and sanitizers. C (~4 min): MLA FP8 and quantized decode tests and
# sanitizers. D (~6 min): timings (backward bench with peers and A/B vs v1 and cp.async,
# forward TMA vs cp.async with cuDNN, quantized decode vs bf16, MLA FP8 vs bf16).
# Everything goes to $OUT/next-<part>.tgz plus a summary; every step has a time limit.
set -u -o pipefail
PART=${1:?usage: validate_next.sh A|B|C|D}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=/tmp/next-$PART
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
if [ ! -f /tmp/next-installed ]; then
  step install 240 python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$TREE/build/gpu" \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF "$TREE" &&
    touch /tmp/next-installed
fi
cd /tmp
PY="$TREE/tests/python"
if [ "$PART" = A ]; then
  # backward: deterministic mode on the ping-pong kernel (per-warp turns), v1 reading lse
  # early, Q/dO by TMA (FLASHKIT_BWD_PP_DET=1: the deterministic path under test)
  step bwd_check 90 env FLASHKIT_BWD_PP_DET=1 python3 "$TREE/scripts/dev/bwd_check.py"
  step bwd_check_v1 90 env FLASHKIT_BWD_SM90_V1=1 python3 "$TREE/scripts/dev/bwd_check.py"
  step racecheck_bwd 200 env FLASHKIT_BWD_PP_DET=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck \
    --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128 256
  step pytest_bwd 200 bash -c "cd $PY && FLASHKIT_BWD_PP_DET=1 python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py"
  grep -h "ALL OK\|SOME FAILED" "$O"/bwd_check*.log >> "$O/summary.txt"
elif [ "$PART" = B ]; then
  # forward: TMA loads and the intra-warpgroup overlap
  step pytest_fwd 240 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py test_index_hardening_gpu.py"
  step memcheck_fwd 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 \
    python3 "$TREE/scripts/sanitize_small.py" --quick --dims 64 96 128 192 256
  step racecheck_fwd 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck --error-exitcode 1 \
    python3 "$TREE/scripts/sanitize_small.py" --quick --dims 96 128 256 --dtypes bfloat16
elif [ "$PART" = C ]; then
  # MLA over the FP8 cache; quantized decode v2
  step pytest_mla 200 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider -s test_mla_fp8_gpu.py test_mla_gpu.py -k 'not sweep_shape'"
  step memcheck_mla 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 \
    python3 "$TREE/scripts/sanitize_mla.py" --quick
  step pytest_decode 240 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider test_decode_gpu.py"
  step memcheck_decode 200 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 \
    python3 "$TREE/scripts/sanitize_decode.py" --quick
  grep -h "relative L2" "$O/pytest_mla.log" >> "$O/summary.txt"
else
  # timings: the SPEC-format CSVs with peers (bench), and A/B prints (bwd_check --perf)
  step bwd_bench 200 env FLASHKIT_BWD_PP_DET=1 python3 -m flashkit.bench --sweep fa3 --quick --mode bwd \
    --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bwd" --tag fast
  step bwd_bench_det 120 env FLASHKIT_BWD_PP_DET=1 python3 -m flashkit.bench --sweep fa3 --quick --mode bwd \
    --deterministic --impls flashkit --out-dir "$O/bwd" --tag det
  step bwd_perf 150 env FLASHKIT_BWD_PP_DET=1 python3 "$TREE/scripts/dev/bwd_check.py" --perf
  step bwd_perf_v1 150 env FLASHKIT_BWD_SM90_V1=1 python3 "$TREE/scripts/dev/bwd_check.py" --perf
  step bwd_perf_notma 150 env FLASHKIT_BWD_PP_DET=1 FLASHKIT_BWD_NO_TMA=1 python3 "$TREE/scripts/dev/bwd_check.py" --perf
  step fwd_tma 200 env FLASHKIT_FWD_TMA=1 python3 -m flashkit.bench --sweep fa3 --quick --mode fwd --impls flashkit sdpa_cudnn --out-dir "$O/fwd" --tag tma
  step fwd_no_tma 200 python3 -m flashkit.bench --sweep fa3 --quick --mode fwd --impls flashkit --out-dir "$O/fwd" --tag notma
  step decode_quant 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --csv "$O/decode-quant.csv"
  step mla_fp8 200 python3 -m flashkit.bench --op mla --quick --impls flashkit flashkit_fp8 --out-dir "$O/mla"
  grep "^D" "$O/bwd_perf.log" | sed 's/^/pp  /' >> "$O/summary.txt"
  grep "^D" "$O/bwd_perf_v1.log" | sed 's/^/v1  /' >> "$O/summary.txt"
  grep "^D" "$O/bwd_perf_notma.log" | sed 's/^/pp-cp.async  /' >> "$O/summary.txt"
  tail -30 "$O/decode_quant.log" >> "$O/summary.txt"
fi
for f in "$O"/pytest_*.log; do [ -f "$f" ] && echo "$(basename "$f"): $(tail -1 "$f")" >> "$O/summary.txt"; done
for f in "$O"/*check_*.log; do [ -f "$f" ] && tail -2 "$f" >> "$O/summary.txt"; done
cp "$O/summary.txt" "$OUT/summary-$PART.txt"
tar -czf "$OUT/next-$PART.tgz" -C "$O" .
cat "$O/summary.txt"
