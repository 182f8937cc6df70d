#!/usr/bin/env bash
# Device calls of 2026-11-28 (twenty-first session); each names the tree it runs on.
#   R (~4 min)   main: the shortest split of 256 tokens where a KV head has >= 16 query rows
#                (kMinChunkManyRows, src/api/decode.cpp). Prediction, from the 2026-11-28 global
#                FLASHKIT_DECODE_MIN_CHUNK A/B: B 1 32/8 4k s_q 4 17.0 -> 15.3 us, 64/8 4k s_q 2
#                16.9 -> 15.1; fewer rows unchanged (the rule is not taken), 8k+ unchanged (longer
#                splits anyway). Env A/B (FLASHKIT_DECODE_MIN_CHUNK_MANY_ROWS=128 = no rule), two
#                interleaved rounds, bf16 and FP8, s_q 1 / 2 / 4 / 8, then the decode / KV-cache GPU
#                tests and the B 1 part of the page-size / s_q table with cuDNN (issue 6's s_q check).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session13.sh R")   output r.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-R}" in
  R)
    O=${OUT:-/tmp}/r
    . "$D/device_steps.sh"
    install_tree "$TREE"
    export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
    cd /tmp
    C="1:2048:32:8 1:4096:32:8 1:8192:32:8 1:4096:64:8 1:4096:32:2 1:4096:32:1 1:4096:8:8 2:4096:32:8 4:2048:32:8"
    for r in 1 2; do
      step "rule-$r" 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 2 4 8 --configs $C
      step "norule-$r" 120 env FLASHKIT_DECODE_MIN_CHUNK_MANY_ROWS=128 python3 "$TREE/scripts/decode_quick_bench.py" \
        --kv bf16 fp8 --sq 1 2 4 8 --configs $C
    done
    (cd "$TREE/tests/python" && step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py test_index_hardening_gpu.py)
    step pagesq 240 python3 -m flashkit.bench --op decode --page-sizes 1 16 --sq 1 4 --batch 1 --seqlens 4k 16k 64k \
      --ratios 32/8 64/8 --flashinfer-path /dev/null --out-dir "$O/bench" --tag page-sq-b1 --no-plot
    tar -czf "${OUT:-/tmp}/r.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 R" >&2; exit 2 ;;
esac
