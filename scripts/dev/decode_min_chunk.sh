#!/usr/bin/env bash
# Device run (2026-11-27, fifteenth session): the balanced plan's shortest split
# (FLASHKIT_DECODE_MIN_CHUNK, tokens; default 256) at small batch, where the 8-bit caches'
# split kernel (4 CTAs / SM: 528 slots on an H100) cuts a B = 1 sequence into 64 splits per KV
# head of 4 tiles each. One build; env A/B, two interleaved rounds, graph timing
# (scripts/decode_quick_bench.py), bf16 / int8 / fp8 caches in the same process; then the decode
# tests with the largest value (a plan with fewer, longer splits).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/decode_min_chunk.sh")   output mc.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
O=${OUT:-/tmp}/mc
. "$D/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install 400 "${INSTALL[@]}"
CFGS=${CFGS:-"1:8192:32:8 1:16384:32:8 1:32768:32:8 1:65536:32:8 1:65536:64:8 4:16384:32:8 16:8192:32:8"}
VALUES=${VALUES:-"256 512 1024 2048"}
cd /tmp
for r in 1 2; do
  for mc in $VALUES; do
    step "mc$mc-$r" 150 env FLASHKIT_DECODE_MIN_CHUNK=$mc python3 "$TREE/scripts/decode_quick_bench.py" \
      --kv bf16 int8 fp8 --configs $CFGS --csv "$O/mc$mc-$r.csv"
  done
done
last=${VALUES##* }
step "tests_mc$last" 200 env FLASHKIT_DECODE_MIN_CHUNK=$last bash -c \
  "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py"
python3 "$D/decode_min_chunk_table.py" "$O" $VALUES | tee -a "$O/summary.txt"
tar -czf "${OUT:-/tmp}/mc.tgz" -C "$(dirname "$O")" "$(basename "$O")"
