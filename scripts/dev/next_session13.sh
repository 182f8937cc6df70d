#!/usr/bin/env bash
# Device calls of 2026-11-28 (twenty-first session); each names the tree it runs on.
#   R (ran 2026-11-28 at 796deb2: the shortest split of 256 tokens where a KV head has >= 16 query rows;
#                mixed, replaced by the split cap below; decode.md "Splits of short calls with many rows")
#   S (~4 min)   main: the split cap (plan_math.h split_cap: short balanced calls with >= 16 rows per item
#                take at most min(512 / rows, target / (2 h_kv)) splits per sequence). Prediction, from R's
#                plans: B 1 32/8 4k s_q 4 bf16 17.0 -> 15.3 us, 64/8 s_q 2 16.9 -> 15.1, the 32-row calls
#                (bf16 32/1, 32/2 s_q 8; FP8 32/8 s_q 8, 64/8 s_q 4) ~26.7 -> ~20.4, FP8 8k 32/8 s_q 4
#                25.1 -> 20.3; every other row unchanged (R's losses at 2k, 32/2 s_q 2, FP8 16 rows not
#                taken). Env A/B (FLASHKIT_DECODE_SPLIT_CAP=0 = no cap), two interleaved rounds, bf16 and
#                FP8, s_q 1 / 2 / 4 / 8, long rows (64k, B 16) for no change, then the decode / KV-cache GPU
#                tests and the B 1 part of the page-size / s_q table with cuDNN (issue 6's s_q check).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session13.sh S")   output s.tgz
#   C (~3 min)   main: the combine reads the plan's header and its first entry before griddepcontrol.wait
#                (combine_kernel.cuh; FLASHKIT_DECODE_COMBINE_PREWAIT=0 = after it). The 2026-11-28 trace
#                (decode-logs/trace-h100-2026-11-28/) has 0.7-1.0 us between the combine's release and its
#                entry read on every B 1 call. Prediction: -0.5..-0.9 us per call that runs the combine
#                kernel (B 1 32/8 4k 12.6 -> ~11.8 us, 16k 26.2 -> ~25.4, FP8 64k 55.7 -> ~54.9), calls
#                without one (fused merge, one split) unchanged. Env A/B, two interleaved rounds (default
#                second in each), then the decode / KV-cache GPU tests, memcheck and racecheck of
#                sanitize_decode.py --quick.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session13.sh C")   output c.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-S}" in
  S)
    O=${OUT:-/tmp}/s
    . "$D/device_steps.sh"
    install_tree "$TREE"
    export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
    cd /tmp
    C="1:2048:32:8 1:4096:32:8 1:8192:32:8 1:4096:64:8 1:4096:32:2 1:4096:32:1 1:4096:8:8 2:4096:32:8 4:2048:32:8"
    for r in 1 2; do
      step "cap-$r" 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 2 4 8 --configs $C
      step "nocap-$r" 120 env FLASHKIT_DECODE_SPLIT_CAP=0 python3 "$TREE/scripts/decode_quick_bench.py" \
        --kv bf16 fp8 --sq 1 2 4 8 --configs $C
    done
    L="1:65536:32:8 16:4096:32:8 1:16384:64:8"
    step cap-long 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 4 --configs $L
    step nocap-long 120 env FLASHKIT_DECODE_SPLIT_CAP=0 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 4 \
      --configs $L
    (cd "$TREE/tests/python" && step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py test_index_hardening_gpu.py)
    step pagesq 240 python3 -m flashkit.bench --op decode --page-sizes 1 16 --sq 1 4 --batch 1 --seqlens 4k 16k 64k \
      --ratios 32/8 64/8 --flashinfer-path /dev/null --out-dir "$O/bench" --tag page-sq-b1 --no-plot
    tar -czf "${OUT:-/tmp}/s.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  C)
    O=${OUT:-/tmp}/c
    . "$D/device_steps.sh"
    install_tree "$TREE"
    cd /tmp
    C="1:1024:32:8 1:4096:32:8 1:16384:32:8 1:65536:32:8 1:4096:64:8 1:16384:32:32 4:8192:32:8 16:4096:32:8 64:8192:32:8"
    for r in 1 2; do
      step "after-$r" 120 env FLASHKIT_DECODE_COMBINE_PREWAIT=0 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 \
        --configs $C
      step "before-$r" 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --configs $C
    done
    step sq4 60 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 --sq 1 4 --configs 1:4096:32:8 1:4096:64:8
    step sq4-after 60 env FLASHKIT_DECODE_COMBINE_PREWAIT=0 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 --sq 1 4 \
      --configs 1:4096:32:8 1:4096:64:8
    (cd "$TREE/tests/python" && step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py test_index_hardening_gpu.py)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    step memcheck 100 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
    step racecheck 100 $S --tool racecheck --print-limit 20 python3 "$TREE/scripts/sanitize_decode.py" --quick
    grep "Race reported" "$O/racecheck.log" | grep -v nvjet | head -5 >> "$O/summary.txt"
    tar -czf "${OUT:-/tmp}/c.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  C2)
    # C's A/B in ABBA order (the first run of a pair tends to be 1-3% slower on short rows)
    O=${OUT:-/tmp}/c2
    . "$D/device_steps.sh"
    install_tree "$TREE"
    cd /tmp
    C="1:1024:32:8 1:4096:32:8 1:16384:32:8 1:65536:32:8 64:8192:32:8"
    step before-1 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 4 --configs $C
    step after-1 120 env FLASHKIT_DECODE_COMBINE_PREWAIT=0 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 4 --configs $C
    step after-2 120 env FLASHKIT_DECODE_COMBINE_PREWAIT=0 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 4 --configs $C
    step before-2 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 4 --configs $C
    tar -czf "${OUT:-/tmp}/c2.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 S|C|C2" >&2; exit 2 ;;
esac
