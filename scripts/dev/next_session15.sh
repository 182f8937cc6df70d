#!/usr/bin/env bash
# Device calls of the twenty-second session (2026-11-28).
#   M (~4 min)  main: the balanced plan's shortest split (FLASHKIT_DECODE_MIN_CHUNK) against the 8-bit
#               caches at B 1-4. At B 1 16k the FP8 kernel's target (4 CTAs/SM, 528 CTAs) leaves each split
#               CTA ~4 tiles, so its start (item, block table, first tiles) weighs as much as its streaming;
#               the bf16 kernel (2 CTAs/SM) has ~8. Prediction: FP8 / int8 at B 1 8k-16k 5-15% less time with
#               a 512-token shortest split, 64k unchanged (its splits are ~1000 tokens), bf16 unchanged or
#               worse. Env runs in ABBA order (default, 256, 512, 1024, 1024, 512, 256, default).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session15.sh M")   output m.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-M}" in
  M)
    O=${OUT:-/tmp}/m
    . "$D/device_steps.sh"
    install_tree "$TREE"
    C="1:4096:32:8 1:8192:32:8 1:16384:32:8 1:32768:32:8 1:65536:32:8 2:16384:32:8 4:8192:32:8 1:16384:64:8"
    i=0
    for mc in 0 256 512 1024 1024 512 256 0; do
      i=$((i + 1))
      if [ "$mc" = 0 ]; then
        (cd /tmp && step "bench-$i-default" 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $C)
      else
        (cd /tmp && FLASHKIT_DECODE_MIN_CHUNK=$mc step "bench-$i-mc$mc" 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $C)
      fi
    done
    tar -czf "${OUT:-/tmp}/m.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 M" >&2; exit 2 ;;
esac
