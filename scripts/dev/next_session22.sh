#!/usr/bin/env bash
# Device calls of the twenty-seventh session (2026-11-28).
#   (Run 2026-11-28; both switches below were removed from the kernel after their measurements.)
#   Y: the first pair's page ids loaded before the piece's first barrier (FLASHKIT_MLA_EARLY_IDS):
#      dev-harness binaries in .carry/mlabin (mla_base = main with EARLY_IDS 0, mla_ids = 1, and their
#      trace builds, which add the point "ids": thread 0's page ids returned), checks, three
#      interleaved rounds on page 64 and page 16 shapes, the traces; then this tree's install (EARLY_IDS
#      1 by default in it for this call), MLA GPU tests and sanitizers.
#   run(carry=[".carry/mlabin"], command="bash scripts/dev/next_session22.sh Y > $OUT/y.txt 2>&1; tail -40 $OUT/y.txt")
#   B: pages of 16 / 32 without runs, box w by warp w (FLASHKIT_MLA_BOX_WARPS): .carry/mlabin holds mla_base
#      (BOX_WARPS 0) and mla_bw (1); scattered page ids (the harness's default) on page 16 / 32 shapes,
#      three interleaved rounds, then consecutive ids (MLA_SEQ=1, the run copies: same SASS path
#      taken by both) two rounds; then this tree's install (BOX_WARPS 1), MLA GPU tests, sanitizers.
#   run(carry=[".carry/mlabin"], command="bash scripts/dev/next_session22.sh B > $OUT/b.txt 2>&1; tail -40 $OUT/b.txt")
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-Y}" in
  Y)
    ( cd "$TREE" && NCU= FM_BUILT= ROUNDS=3 \
      CFGS="128 2 4096;128 2 16384;128 1 8192;64 2 4096;16 1 16384;32 2 4096;128 2 4096 16;32 2 4096 16" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1 )
    O=${OUT:-/tmp}/y; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    tar -czf "${OUT:-/tmp}/y.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    grep "^check" "${OUT:-/tmp}/variants.log"; cat "$O/summary.txt"; tail -1 "$O/mla_tests.log"
    ;;
  B)
    ( cd "$TREE" && NCU= FM_BUILT= ROUNDS=3 \
      CFGS="128 2 4096 16;128 1 8192 16;64 2 8192 16;16 1 16384 16;32 2 4096 16;128 2 4096 32;16 1 16384 32" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1; mv "${OUT:-/tmp}/mla" "${OUT:-/tmp}/mla_scattered" )
    ( cd "$TREE" && NCU= FM_BUILT= ROUNDS=2 CHECK= MLA_SEQ=1 CFGS="128 2 4096 16;16 1 16384 16" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants_seq.log" 2>&1; mv "${OUT:-/tmp}/mla" "${OUT:-/tmp}/mla_seq" )
    tar -czf "${OUT:-/tmp}/ab.tgz" -C "${OUT:-/tmp}" mla_scattered mla_seq
    O=${OUT:-/tmp}/b; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    tar -czf "${OUT:-/tmp}/b.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    grep "^check" "${OUT:-/tmp}/variants.log"; cat "$O/summary.txt"; tail -1 "$O/mla_tests.log"
    ;;
  M)
    # v24 (exponentials interleaved at page >= 64, box warps at page 16 / 32): install, the whole MLA
    # matrix with FlashMLA (sequential block tables), then pages 16 / 32 / 64 with shuffled tables.
    #   run(carry=[".carry/flashmla_built"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session22.sh M")
    O=${OUT:-/tmp}/m; . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd /tmp && step matrix 300 python3 -m flashkit.bench --op mla --flashmla-path "$TREE/.carry/flashmla_built" \
      --out-dir "$O/matrix")
    (cd /tmp && step shuffled 220 python3 -m flashkit.bench --op mla --flashmla-path "$TREE/.carry/flashmla_built" \
      --block-table shuffled --page-sizes 16 32 64 --out-dir "$O/shuffled")
    tar -czf "${OUT:-/tmp}/m.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    cat "$O/summary.txt"
    ;;
  P)
    # Page 16 with box warps: the exponentials interleaved there too (mla_mixp: FLASHKIT_MLA_EXP_MIX_PAGED=7)
    # and the 128-byte L2 promotion (mla_promo128: mla_base under FLASHKIT_MLA_L2_PROMO=128), against
    # mla_base (main); consecutive ids (the bench's tables) three rounds, then scattered two rounds.
    #   run(carry=[".carry/mlabin"], command="bash scripts/dev/next_session22.sh P > $OUT/p.txt 2>&1; tail -30 $OUT/p.txt")
    ( cd "$TREE" && NCU= FM_BUILT= ROUNDS=3 MLA_SEQ=1 \
      CFGS="128 2 4096 16;128 1 8192 16;64 2 4096 16;64 1 4096 16;16 1 4096 16;16 1 16384 16;32 2 4096 16" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1; mv "${OUT:-/tmp}/mla" "${OUT:-/tmp}/mla_seq" )
    ( cd "$TREE" && NCU= FM_BUILT= ROUNDS=2 CHECK= CFGS="128 2 4096 16;16 1 16384 16" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants_scattered.log" 2>&1; mv "${OUT:-/tmp}/mla" "${OUT:-/tmp}/mla_scattered" )
    tar -czf "${OUT:-/tmp}/p.tgz" -C "${OUT:-/tmp}" mla_seq mla_scattered
    grep "^check" "${OUT:-/tmp}/variants.log"
    ;;
  *) echo "usage: $0 Y|B|M|P" >&2; exit 2 ;;
esac
