#!/usr/bin/env bash
# Device calls of the twenty-second session (2026-11-28).
#   M (~4 min)  main: the balanced plan's shortest split (FLASHKIT_DECODE_MIN_CHUNK) against the 8-bit
#               caches at B 1-4. At B 1 16k the FP8 kernel's target (4 CTAs/SM, 528 CTAs) leaves each split
#               CTA ~4 tiles, so its start (item, block table, first tiles) weighs as much as its streaming;
#               the bf16 kernel (2 CTAs/SM) has ~8. Prediction: FP8 / int8 at B 1 8k-16k 5-15% less time with
#               a 512-token shortest split, 64k unchanged (its splits are ~1000 tokens), bf16 unchanged or
#               worse. Env runs in ABBA order (default, 256, 512, 1024, 1024, 512, 256, default).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session15.sh M")   output m.tgz
#   R (~4 min)  branch wip/mla-page-runs: MLA pages of 16 (first run: also 32) tokens whose ids are consecutive within a
#               64-token block are loaded by one TMA box per chunk (a second tensor map whose boxes span
#               64 / page consecutive page ids) instead of one per page. Prediction: page 16 / page 64 time
#               from 1.01-1.18 (median 1.04) to within 1-2% on the bench's sequential block tables; page
#               32 likewise; page 64 / 128 unchanged; random block tables unchanged (no runs). Runs: MLA GPU
#               tests, memcheck and synccheck of sanitize_mla.py --quick (now with two run cases), then the
#               flashkit-only MLA bench (8k, h_q 16/64/128, s_q 1/2, pages 16/32/64), env A/B against
#               FLASHKIT_MLA_PAGE_RUNS=0 in ABBA order.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session15.sh R")   output r.tgz
#   P (~4 min)  the same branch: the whole MLA matrix, flashkit only, pages 16 / 64 / 128, runs on and off.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session15.sh P")   output p.tgz
#   T (~3 min)  main: page 32 with two-page run boxes (FLASHKIT_MLA_PAGE_RUNS=32) against one box per page, ABBA x2.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session15.sh T")   output t.tgz
#   U (~4 min, NOT RUN YET)  main: the page-run tests (their h_kv 2 case is new since the last GPU run), then
#               the MLA matrix at pages 16 / 64 / 128 on shuffled block tables.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session15.sh U")   output u.tgz
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
  R)
    O=${OUT:-/tmp}/r
    . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    i=0
    for v in runs off off runs; do
      i=$((i + 1))
      env_v=""; [ $v = off ] && env_v="FLASHKIT_MLA_PAGE_RUNS=0"
      (cd /tmp && step "bench-$i-$v" 150 env $env_v python3 -m flashkit.bench --op mla --impls flashkit --seqlens 8192 \
        --heads 16 64 128 --sq 1 2 --modes fixed --page-sizes 16 32 64 --out-dir "$O/bench-$i-$v" --no-plot)
    done
    tar -czf "${OUT:-/tmp}/r.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  P)
    # The whole MLA matrix (48 configurations), flashkit only, pages 16 / 64 / 128: the page-size bar of
    # issue 7 with the page runs on, then with FLASHKIT_MLA_PAGE_RUNS=0.
    O=${OUT:-/tmp}/p
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd /tmp && step matrix-runs 200 python3 -m flashkit.bench --op mla --impls flashkit --page-sizes 16 64 128 \
      --out-dir "$O/runs" --no-plot)
    (cd /tmp && step matrix-off 200 env FLASHKIT_MLA_PAGE_RUNS=0 python3 -m flashkit.bench --op mla --impls flashkit \
      --page-sizes 16 64 128 --out-dir "$O/off" --no-plot)
    tar -czf "${OUT:-/tmp}/p.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  T)
    # Page 32 with two-page run boxes (FLASHKIT_MLA_PAGE_RUNS=32) against one box per page, on the rows where
    # the first call saw it 7% slower (h_q 128 s_q 2) and two memory-bound ones; ABBA twice.
    O=${OUT:-/tmp}/t
    . "$D/device_steps.sh"
    install_tree "$TREE"
    i=0
    for v in r32 def def r32 r32 def def r32; do
      i=$((i + 1))
      env_v=""; [ $v = r32 ] && env_v="FLASHKIT_MLA_PAGE_RUNS=32"
      (cd /tmp && step "bench-$i-$v" 100 env $env_v python3 -m flashkit.bench --op mla --impls flashkit \
        --seqlens 4096 16384 --heads 16 128 --sq 2 --modes fixed --page-sizes 32 64 --out-dir "$O/b$i" --no-plot)
    done
    tar -czf "${OUT:-/tmp}/t.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  U)
    # Not run yet (prepared after the 2026-11-28 budget was spent): the whole MLA matrix, flashkit only, pages
    # 16 / 64 / 128 on shuffled block tables (--block-table shuffled: a fragmented pool, where the page-16 run
    # boxes do not apply). Expected: page 16 / page 64 as with the runs off on sequential tables (median ~1.04).
    O=${OUT:-/tmp}/u
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd /tmp && step page_run_tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      "$TREE/tests/python/test_mla_gpu.py" -k "page_runs or page_sizes")
    (cd /tmp && step matrix-shuffled 300 python3 -m flashkit.bench --op mla --impls flashkit --page-sizes 16 64 128 \
      --block-table shuffled --out-dir "$O/shuffled" --no-plot)
    tar -czf "${OUT:-/tmp}/u.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 M|R|P|T|U" >&2; exit 2 ;;
esac
