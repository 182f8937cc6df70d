#!/usr/bin/env bash
# Device run of decode combine v2 (compact rows, every copy a cp.async) against v9's
# combine in the same machine session:
#   rm -rf .carry/cur && mkdir -p .carry/cur && git ls-files | tar -cf - -T - | tar -xf - -C .carry/cur
#   git show <old>:src/kernels/decode/combine_kernel.cuh > .carry/cur/old_combine_kernel.cuh
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/validate_combine2.sh")
# Steps: install (new), decode + kvcache GPU tests, memcheck + racecheck of the small decode
# cases, quick bench (graph timing, per-kernel profile), FLASHKIT_DECODE_WAVES 2 / 4, the B = 1
# split-size probe; then the old combine rebuilt (one file) and the same quick bench.
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/comb2
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install_new 300 "${INSTALL[@]}"
cd /tmp
QB="python3 $TREE/scripts/decode_quick_bench.py"
CF="1:65536:32:8 1:16384:32:8 1:8192:32:8 16:4096:32:8 16:8192:32:8 64:1024:32:8 64:8192:32:8"
step bench_new 240 $QB --kv bf16 int8 fp8 --configs $CF --csv "$O/new.csv" --profile
step decode_tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py"
step memcheck 200 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
step racecheck 240 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck --print-limit 200 python3 "$TREE/scripts/sanitize_decode.py" --quick
for w in 2 4; do
  step bench_waves$w 150 env FLASHKIT_DECODE_WAVES=$w $QB --kv bf16 fp8 --configs 1:65536:32:8 16:4096:32:8 16:8192:32:8 64:1024:32:8
done
step probe 200 python3 "$TREE/scripts/dev/decode_split_probe.py" "$TREE/scripts"
cp "$TREE/old_combine_kernel.cuh" "$TREE/src/kernels/decode/combine_kernel.cuh"
cd "$TREE" && step install_old 300 "${INSTALL[@]}" && cd /tmp
step bench_old 240 $QB --kv bf16 int8 fp8 --configs $CF --csv "$O/old.csv" --profile
tar -czf "${OUT:-/tmp}/comb2.tgz" -C "$(dirname "$O")" "$(basename "$O")"
