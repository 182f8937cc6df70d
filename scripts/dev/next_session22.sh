#!/usr/bin/env bash
# Device calls of the twenty-seventh session (2026-11-28).
#   Y: the first pair's page ids loaded before the piece's first barrier (FLASHKIT_MLA_EARLY_IDS):
#      dev-harness binaries in .carry/mlabin (mla_base = main with EARLY_IDS 0, mla_ids = 1, and their
#      trace builds, which add the point "ids": thread 0's page ids returned), checks, three
#      interleaved rounds on page 64 and page 16 shapes, the traces; then this tree's install (EARLY_IDS
#      1 by default in it for this call), MLA GPU tests and sanitizers.
#   run(carry=[".carry/mlabin"], command="bash scripts/dev/next_session22.sh Y > $OUT/y.txt 2>&1; tail -40 $OUT/y.txt")
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
  *) echo "usage: $0 Y" >&2; exit 2 ;;
esac
