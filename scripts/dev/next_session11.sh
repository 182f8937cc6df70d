#!/usr/bin/env bash
# Device calls of 2026-11-27 (twentieth session), on a tree with the two branches owed since the
# nineteenth merged in (wip/decode-no-empty-splits, wip/bwd-prepost-order):
#   S (~10 min)  install; every GPU test file except the three backward ones (the backward kernels
#                have not changed since the suite at f5df1fc), 500 s: the new decode tests at B 1024 and
#                over a forked batch, MLA's cos_diff checks, the float64 decode reference, and the
#                balanced plan's count of only the splits that hold tokens.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session11.sh S")          output s.tgz
#   D (~8 min)   OLD_TREE (default .carry/old, `git archive <sha>` of main before the merge) installed
#                with pip --target into /tmp/oldpkg; graph timing of the decode quick bench, this tree
#                against the old one, two interleaved rounds, at the lengths the empty-split fix touches
#                (650 / 1000 / 1500 tokens) and a few long rows; then FlashMLA's own test script (its
#                2025-04 tests/test_flash_mla.py, carried unchanged in .carry/fmt with a flash_mla.py that
#                re-exports flashkit.mla) in bf16 and fp16: it asserts cos_diff < 1e-5 on out and lse on
#                48 configurations each (b 128, s_k 4k/8k/16k, h_q 16..128, s_q 1/2, fixed and varlen).
#   run(carry=[".carry/old", ".carry/fmt"], command="bash scripts/dev/next_session11.sh D")   output d.tgz
#   B (~6 min)   FLASHKIT_BWD_PREPOST_REVERSE=0/1 (the pre and post kernels walk their items from the
#                last), two interleaved rounds of scripts/dev/bwd_aux_share.py.
#   run(command="bash scripts/dev/next_session11.sh B")                                output b.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
BWD_FILES="test_backward_gpu.py test_backward_families_gpu.py test_bwd_det_residency_gpu.py"
case "${1:-S}" in
  S)
    O=${OUT:-/tmp}/s
    . "$D/device_steps.sh"
    install_tree "$TREE"
    sel="."
    for f in $BWD_FILES; do sel="$sel --ignore=$f"; done
    step suite 500 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      --durations=25 $sel"
    tar -czf "${OUT:-/tmp}/s.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  D)
    O=${OUT:-/tmp}/d
    . "$D/device_steps.sh"
    OLD=${OLD_TREE:-$TREE/.carry/old}
    install_tree "$TREE"
    install_old "$OLD"
    CFGS=${CFGS:-"1:650:32:8 1:1000:32:8 1:1500:32:8 4:650:32:8 1:700:32:32 1:16384:32:8 16:8192:32:8 1:64:32:8"}
    cd /tmp
    for r in 1 2; do
      step "old$r" 150 env PYTHONPATH=/tmp/oldpkg python3 "$TREE/scripts/decode_quick_bench.py" \
        --kv bf16 fp8 --configs $CFGS --csv "$O/old$r.csv"
      step "new$r" 150 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --configs $CFGS --csv "$O/new$r.csv"
    done
    for dt in bf16 fp16; do
      step "flashmla_test_$dt" 200 env PYTHONPATH="$TREE/.carry/fmt" python3 "$TREE/.carry/fmt/test_flash_mla.py" --dtype $dt
    done
    tar -czf "${OUT:-/tmp}/d.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  B)
    O=${OUT:-/tmp}/b
    . "$D/device_steps.sh"
    install_tree "$TREE"
    cd /tmp
    for r in 1 2; do
      for v in 0 1; do
        step "r$v-$r" 120 env FLASHKIT_BWD_PREPOST_REVERSE=$v python3 "$D/bwd_aux_share.py" --out "$O/r$v-$r.txt"
      done
    done
    tar -czf "${OUT:-/tmp}/b.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  F)
    # The split count above which the combine kernel, not the split kernel's fused merge, merges a
    # sequence (FLASHKIT_DECODE_FUSED_MAX_SPLITS; D found FP8 B 1 1500 tokens 23% slower once its
    # 23 splits, 11 of them empty, became 12, which the fused merge takes): caps 1 (never fused), 8
    # and none, against OLD_TREE (main before the empty-split change), at lengths whose split counts
    # fall in 6..23; two interleaved rounds; then the decode tests with cap 4.
    O=${OUT:-/tmp}/f
    . "$D/device_steps.sh"
    OLD=${OLD_TREE:-$TREE/.carry/old}
    install_tree "$TREE"
    install_old "$OLD"
    CFGS=${CFGS:-"1:450:32:8 1:650:32:8 1:768:32:8 1:896:32:8 1:1500:32:8 1:2500:32:8 4:650:32:8 1:2000:32:32 16:4096:32:8 1:8192:32:8"}
    cd /tmp
    for r in 1 2; do
      step "old$r" 150 env PYTHONPATH=/tmp/oldpkg python3 "$TREE/scripts/decode_quick_bench.py" \
        --kv bf16 fp8 --configs $CFGS --csv "$O/old$r.csv"
      for c in 0 8 1; do
        step "cap$c-$r" 150 env FLASHKIT_DECODE_FUSED_MAX_SPLITS=$c python3 "$TREE/scripts/decode_quick_bench.py" \
          --kv bf16 fp8 --configs $CFGS --csv "$O/cap$c-$r.csv"
      done
    done
    (cd "$TREE/tests/python" && step tests_cap4 300 env FLASHKIT_DECODE_FUSED_MAX_SPLITS=4 python3 -m pytest -q -m gpu -n 6 \
      -p no:cacheprovider test_decode_gpu.py)
    tar -czf "${OUT:-/tmp}/f.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 S|D|B|F" >&2; exit 2 ;;
esac
