#!/usr/bin/env bash
# Device calls prepared in the twenty-seventh session (2026-11-28) for the next one.
#   T (~2 min; NOT RUN): where pages of 16 lose at short pieces. mla.md "What is left" (v24): the page-16 /
#      page-64 ratio is 1.04-1.07 at the 4k rows with 16-64 query rows per KV head, in both layouts. The
#      trace build of main (.carry/mlabin/mla_trace, built from e691b3d's kernel sources; mla_base is the
#      plain build) at page 16 (consecutive ids: MLA_SEQ=1, the bench's layout; then scattered) and page
#      64 on those rows: per-piece prologue (free / ids / K issued / Q / sync), pairs, epilogue, CTA end
#      spread. Then the plain binary's times on the same rows for reference.
#   run(carry=[".carry/mlabin"], command="bash scripts/dev/next_session23.sh T > $OUT/t.txt 2>&1; tail -60 $OUT/t.txt")
#   H (~3 min; only where an H100 is lent): v24 on the H100: install, MLA GPU tests, sanitizers, the whole
#      MLA matrix with FlashMLA (bench/results/mla-h100-2026-11-28.csv is v20's).
#   run(kind=<h100>, carry=[".carry/flashmla_built"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session23.sh H")
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
BIN=$TREE/.carry/mlabin
case "${1:-T}" in
  T)
    nvidia-smi --query-gpu=name --format=csv,noheader
    for c in "16 1 4096" "32 2 4096" "64 1 4096" "16 1 16384"; do
      for pg in "16 seq" "16 scattered" "64 seq"; do
        set -- $pg
        if [ "$2" = seq ]; then export MLA_SEQ=1; else unset MLA_SEQ; fi
        echo "== trace $c page $1 ($2)"; timeout 60 "$BIN/mla_trace" perf $c $1 2>&1 | tail -8 | grep -v "trace wg" | cut -c1-900
        echo "   plain: $(timeout 60 "$BIN/mla_base" perf $c $1 2>&1 | tail -1)"
      done
    done
    ;;
  H)
    O=${OUT:-/tmp}/h; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    (cd /tmp && step matrix 300 python3 -m flashkit.bench --op mla --flashmla-path "$TREE/.carry/flashmla_built" \
      --out-dir "$O/matrix")
    tar -czf "${OUT:-/tmp}/h.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    cat "$O/summary.txt"
    ;;
  *) echo "usage: $0 T|H" >&2; exit 2 ;;
esac
