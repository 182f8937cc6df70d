#!/usr/bin/env bash
# Device calls of the twenty-third session (2026-11-28).
#   V (~6 min)  main: the MLA kernel with warpgroup 0's reload before the next Q K^T at <= 128 rows per KV
#               head (FLASHKIT_MLA_RELOAD_FIRST_ROWS): MLA GPU tests, memcheck and synccheck of
#               sanitize_mla.py --quick, then the whole FlashMLA matrix with FlashMLA in the same process
#               (pages 16 / 32 / 64 / 128 for flashkit, 64 for FlashMLA).
#   run(carry=[".carry/flashmla_built"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session16.sh V")
#   H (~5 min, an H100)  V, then the dev-harness A/B of the reload-first threshold (FLASHKIT_MLA_RELOAD_FIRST_ROWS
#               0 / 128 / 256: binaries mla_rf0, mla_rf128, mla_rf256 in .carry/mlabin), chosen on the H200.
#   run(kind="nvidia-h100-x1", carry=[".carry/flashmla_built", ".carry/mlabin"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session16.sh H")
#   D (~4 min)  wip/decode-fastdiv (.carry/cur) against main (.carry/old), bf16 decode graph times, ABAB.
#   run(kind="nvidia-h100-x1", carry=[".carry/cur", ".carry/old"], command="bash scripts/dev/next_session16.sh D")
#   Q (~4 min, NOT RUN YET)  wip/decode-q-shift against main, FP8 / int8 rows (.carry/cur = git archive wip/decode-q-shift,
#               .carry/old = git archive main).
#   run(kind="nvidia-h100-x1", carry=[".carry/cur", ".carry/old"], command="bash scripts/dev/next_session16.sh Q")
#   N (~2 min, NOT RUN YET)  ncu of MLA v19 against FlashMLA at h_q 128 s_q 2 8k (mla_ncu_compare.sh).
#   run(carry=[".carry/mlabin", ".carry/flashmla_built"], command="bash scripts/dev/next_session16.sh N")
#   W (~2 min, NOT RUN YET)  wip/mla-load-warp0 against v19 in the dev harness (binaries mla_v19 / mla_w0 in .carry/mlabin).
#   run(carry=[".carry/mlabin"], command="bash scripts/dev/next_session16.sh W")
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-V}" in
  V)
    O=${OUT:-/tmp}/v
    . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    (cd /tmp && step matrix 300 python3 -m flashkit.bench --op mla --flashmla-path "$TREE/.carry/flashmla_built" \
      --out-dir "$O/matrix")
    tar -czf "${OUT:-/tmp}/v.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  H)
    bash "$0" V
    NCU= FM_BUILT= ROUNDS=2 CFGS="16 1 16384;32 2 4096;64 1 16384;128 1 8192;64 2 8192;128 2 16384;128 2 4096" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1
    ;;
  D | Q)
    # Two trees, main (.carry/old) and a branch (.carry/cur), installed at once, then graph time in ABAB order
    # and the branch's decode tests. D: wip/decode-fastdiv (bf16 page lookups by FastDiv; run 2026-11-28 and
    # merged). Q (NOT RUN YET): wip/decode-q-shift, the 8-bit kernels look up power-of-two pages by a shift
    # (registers stay 128 at D 128); prediction: FP8 / int8 0-1% less time.
    O=${OUT:-/tmp}/$(echo "$1" | tr 'DQ' 'dq')
    . "$D/device_steps.sh"
    device_header
    ( install_old "$TREE/.carry/old" ) &
    ( install_cmd "$TREE/.carry/cur"; step install_new 400 "${INSTALL[@]}" ) &
    wait
    if [ "$1" = D ]; then
      KV="bf16"; CF="16:8192:32:8 64:8192:32:8 128:4096:32:8 16:4096:32:32 1:65536:32:8"
      TESTS=("$TREE/.carry/cur/tests/python/test_decode_gpu.py")
    else
      KV="fp8 int8"; CF="16:8192:32:8 64:8192:32:8 128:4096:32:8 1:65536:32:8 1:16384:32:8"
      TESTS=("$TREE/.carry/cur/tests/python/test_decode_gpu.py" "$TREE/.carry/cur/tests/python/test_kvcache_gpu.py")
    fi
    for i in 1 2; do
      (cd /tmp && PYTHONPATH=/tmp/oldpkg step bench_old_$i 90 python3 "$TREE/scripts/decode_quick_bench.py" --kv $KV --configs $CF)
      (cd /tmp && step bench_new_$i 90 python3 "$TREE/scripts/decode_quick_bench.py" --kv $KV --configs $CF)
    done
    (cd /tmp && step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider "${TESTS[@]}")
    tar -czf "$O.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  N)
    # NOT RUN YET. ncu of the v19 MLA split kernel against FlashMLA's at a compute-bound shape: per-opcode
    # instructions, warp states and source-level stall samples of both (mla.md "What is left"). Needs
    # .carry/mlabin/mla_v19 (scripts/dev/mla_build_variants.sh with VARIANTS="v19:") and .carry/flashmla_built.
    CFG=${CFG:-128 2 8192} VAR=v19 bash "$D/mla_ncu_compare.sh"
    ;;
  W)
    # NOT RUN YET. Branch wip/mla-load-warp0, two A/B defines against v19 (main), binaries in .carry/mlabin:
    #   mla_w0    -DFLASHKIT_MLA_LOAD_WARP0=1: warps 1-3 of a warpgroup skip the TMA load_chunks (a retry of a
    #             v15-era negative, now that v19 showed issue slots matter). Prediction: -2..-5% at h_q 128, 0 at 16.
    #   mla_erall -DFLASHKIT_MLA_EARLY_RELOAD_ROWS=-1: FlashMLA's warpgroup-0 order (reload buffer 0's first chunks
    #             before the scale barrier) in every call (-2..+9% at v15). If it wins at <= 128 rows it needs its
    #             own instantiation there: a run-time row test serializes the wgmmas (ptxas C7511).
    # Checks, two interleaved rounds, ncu instruction counts of each.
    ROUNDS=2 CFGS="16 1 16384;32 2 4096;64 1 16384;128 1 8192;128 2 16384;128 2 4096" NCU_CFGS="128 2 8192" \
      bash "$D/mla_ab_ncu.sh"
    ;;
  *) echo "usage: $0 V|H|D|Q|N|W" >&2; exit 2 ;;
esac
