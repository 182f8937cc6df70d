#!/usr/bin/env bash
# Device validation of decode v11 + the forward's TMA-store epilogue (2026-11-26), in parts:
#   A: OLD tree (arg 2, e.g. .carry/old = v10) and this tree timed with the decode quick bench
#      in one session; the issue-10 quantized-cache table (CSV); the forward FA3 sweep (bf16,
#      D 64/128/256, cuDNN and FA2); then FLASHKIT_DECODE_QUANT_HINT=1 rebuilt: 8-bit decode
#      tests and timing.
#   B: the SASS check of the hinted copies, the issue-10 table, the whole GPU pytest suite and the
#      small sanitizer runs (forward, backward, decode).
#   run(carry=[".carry/cur", ".carry/old"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/validate_v11.sh A .carry/old")
set -u -o pipefail
PART=${1:?usage: validate_v11.sh A OLD_TREE | B}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/v11-$PART
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
CF="1:65536:32:8 1:16384:32:8 1:8192:32:8 16:8192:32:8 16:4096:32:8 64:8192:32:8 16:16384:32:32"
QCF="1:65536:32:8 1:16384:32:8 16:8192:32:8 16:16384:32:32 64:8192:32:8 64:16384:32:8 128:4096:32:8 128:8192:32:8"
if [ "$PART" = A ]; then
  OLD=$(cd "${2:?old tree}" && pwd)
  install_cmd "$OLD"
  (cd "$OLD" && step install_old 420 "${INSTALL[@]}")
  (cd /tmp && step decode_old 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF --csv "$O/decode-old.csv")
  install_cmd "$TREE"
  step install 420 "${INSTALL[@]}"
  cd /tmp
  step decode_new 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF --csv "$O/decode-new.csv"
  step quant 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $QCF --csv "$O/quant.csv"
  step fwd_bench 240 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag v7
  H="$TREE/src/kernels/decode/split_kernel.cuh"
  sed -i 's/^#define FLASHKIT_DECODE_QUANT_HINT 0$/#define FLASHKIT_DECODE_QUANT_HINT 1/' "$H"
  (cd "$TREE" && step install_hint 420 "${INSTALL[@]}")
  step hint_tests 200 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py -k 'int8 or fp8 or quant' -x"
  step hint_bench 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv int8 fp8 --configs $CF --csv "$O/decode-hint.csv"
  sed -i 's/^#define FLASHKIT_DECODE_QUANT_HINT 1$/#define FLASHKIT_DECODE_QUANT_HINT 0/' "$H"
else
  install_cmd "$TREE"
  step install 420 "${INSTALL[@]}"
  cd /tmp
  LIB=$(python3 -c "import flashkit, pathlib; p = pathlib.Path(flashkit.__file__).parent; print(next(iter(sorted(p.rglob('libflashkit*.so*')))))")
  step sass_desc 60 bash "$TREE/scripts/check_ldgsts_desc.sh" "$LIB"
  step quant 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $QCF --csv "$O/quant.csv"
  step pytest_gpu 400 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ."
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_fwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
  step racecheck_fwd 150 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
  step synccheck_fwd 150 $S --tool synccheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
  step memcheck_decode 120 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
  step racecheck_decode 150 $S --tool racecheck --print-limit 30 python3 "$TREE/scripts/sanitize_decode.py" --quick
  step memcheck_bwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick
fi
tar -czf "${OUT:-/tmp}/v11-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
