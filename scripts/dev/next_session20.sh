#!/usr/bin/env bash
# Device calls of the twenty-sixth session (2026-11-28).
#   W (~5 min): main with the O TMA store (v23): install, MLA GPU tests, memcheck, synccheck, the whole
#       MLA matrix with FlashMLA (default L2 promotion of the cache maps, 256 B); then the page-64 part
#       of the matrix again with FLASHKIT_MLA_L2_PROMO=128 and once more with 256 (same process order
#       as the first, to see run-to-run drift): the dev harness had h_q 16 s_q 1 16k 3 % faster at 128
#       (0.559 / 0.560 against 0.577 / 0.578 ms), 128 2 4k 0.8 % slower, the rest within noise.
#   run(carry=[".carry/flashmla_built"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session20.sh W")
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-W}" in
  W)
    O=${OUT:-/tmp}/w; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    (cd /tmp && step matrix 300 python3 -m flashkit.bench --op mla --flashmla-path "$TREE/.carry/flashmla_built" \
      --out-dir "$O/matrix")
    for pr in 128 256; do
      (cd /tmp && FLASHKIT_MLA_L2_PROMO=$pr step matrix_p$pr 200 python3 -m flashkit.bench --op mla \
        --flashmla-path "$TREE/.carry/flashmla_built" --page-sizes 64 --out-dir "$O/promo$pr")
    done
    tar -czf "${OUT:-/tmp}/w.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 W" >&2; exit 2 ;;
esac
