#!/usr/bin/env bash
# Device run of decode v10 (combine v2 + the fused merge in the split kernel) against the
# committed baseline, same machine session:
#   rm -rf .carry/cur && mkdir -p .carry/cur && git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C .carry/cur
#   rm -rf .carry/old && mkdir -p .carry/old && git archive <baseline> | tar -x -C .carry/old
#   run(carry=[".carry/cur", ".carry/old"], command="bash .carry/cur/scripts/dev/validate_fused.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
OLD=$(dirname "$TREE")/old
O=${OUT:-/tmp}/fused
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
install_cmd "$TREE"
step install_new 300 "${INSTALL[@]}"
cd /tmp
QB="python3 $TREE/scripts/decode_quick_bench.py"
CF="1:65536:32:8 1:16384:32:8 1:8192:32:8 16:4096:32:8 16:8192:32:8 16:4096:64:8 64:1024:32:8 64:8192:32:8"
step bench_new 240 $QB --kv bf16 int8 fp8 --configs $CF --csv "$O/new.csv" --profile
step decode_tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py"
step memcheck 200 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
step racecheck 240 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck --print-limit 200 python3 "$TREE/scripts/sanitize_decode.py" --quick
step synccheck 240 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool synccheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
install_cmd "$OLD"
step install_old 300 "${INSTALL[@]}"
step bench_old 240 $QB --kv bf16 int8 fp8 --configs $CF --csv "$O/old.csv"
tar -czf "${OUT:-/tmp}/fused.tgz" -C "$(dirname "$O")" "$(basename "$O")"
