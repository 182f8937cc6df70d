#!/usr/bin/env bash
# Device A/B of the decode kernels of two trees, interleaved (old, new, old, new: the second
# installs reuse the build folders), graph timing with decode_quick_bench.py; then the decode
# GPU tests and the decode sanitizer runs on the new tree.
#   run(carry=[".carry/cur", ".carry/old"], command="bash .carry/cur/scripts/dev/decode_ab.sh .carry/old")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
OLD=$(cd "${1:?usage: decode_ab.sh OLD_TREE}" && pwd)
O=${OUT:-/tmp}/dab
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
CF=${DECODE_CONFIGS:-"1:65536:32:8 1:16384:32:8 1:8192:32:8 1:65536:32:32 16:8192:32:8 16:4096:32:8"}
for i in 1 2; do
  for side in old new; do
    T=$([ $side = old ] && echo "$OLD" || echo "$TREE")
    install_cmd "$T"
    (cd "$T" && step install_${side}_$i 420 "${INSTALL[@]}")
    (cd /tmp && step bench_${side}_$i 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF --csv "$O/$side$i.csv")
  done
done
cd /tmp
step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py test_index_hardening_gpu.py"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck_decode 120 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
step racecheck_decode 150 $S --tool racecheck --print-limit 30 python3 "$TREE/scripts/sanitize_decode.py" --quick
step synccheck_decode 120 $S --tool synccheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
tar -czf "${OUT:-/tmp}/dab.tgz" -C "$(dirname "$O")" "$(basename "$O")"
