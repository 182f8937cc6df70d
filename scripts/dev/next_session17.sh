#!/usr/bin/env bash
# Device calls of the twenty-fourth session (2026-11-28).
#   B (~3 min)  wip/mla-box64: the whole-block-box kernel (pages >= 64) as its own instantiation, the other
#               load paths compiled out of its block loop (binaries mla_v19 = main, mla_box64 in .carry/mlabin).
#               Checks, two interleaved rounds, ncu counts of each, then the warp states and source counters
#               of mla_box64 at h_q 128 s_q 2 8k (stall_no_inst against v19's 6971 samples).
#   run(carry=[".carry/mlabin", ".carry/flashmla_built"], command="bash scripts/dev/next_session17.sh B")
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
case "${1:-B}" in
  B)
    ROUNDS=2 CFGS="16 1 16384;32 2 4096;64 1 16384;128 1 8192;128 2 16384;128 2 4096" NCU_CFGS="128 2 8192" \
      bash "$D/mla_ab_ncu.sh"
    CFG="128 2 8192" VAR=box64 FMSRC= bash "$D/mla_ncu_compare.sh" > "${OUT:-/tmp}/ncu_box64.log" 2>&1
    python3 "$D/ncu_stall_diff.py" <(zcat "${OUT:-/tmp}/ncu/src.csv.gz") <(zcat "${OUT:-/tmp}/ncu/src.csv.gz") \
      > "${OUT:-/tmp}/stalls_box64.txt" 2>&1
    ;;
  *) echo "usage: $0 B" >&2; exit 2 ;;
esac
