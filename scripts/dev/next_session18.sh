#!/usr/bin/env bash
# Device calls prepared at the end of the twenty-fourth session (2026-11-28) for the next one.
#   V (~3 min; H200, then the same on an H100 with kind="nvidia-h100-x1"): main at v21 (arrive first):
#       MLA GPU tests, memcheck, synccheck, then the whole FlashMLA matrix (the v20 files are in bench/results).
#   run(carry=[".carry/flashmla_built"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session16.sh V")
#   M (~4 min): dev harness (.carry/mlabin: mla_v21 = main, mla_lateids = FLASHKIT_MLA_LATE_IDS=1, mla_spin =
#       FLASHKIT_MLA_SPIN_WAIT=1: spinning chunk waits, FlashMLA's form; on the H200 the memory-bound rows are
#       3-4 % behind FlashMLA while they are at parity on the H100, and v14's suspending waits were measured
#       on an H100 only. Prediction: spin 0..-3 % at h_q 16-32 on the H200, +0..1.5 % compute-bound;
#       mla_pvsplit = FLASHKIT_MLA_PV_SPLIT=1: warpgroup 0's last P V as two n128 quarters, buffer 1's chunks 0-1
#       reloaded after the first; warpgroup 1's next Q K^T waited 4.2 % of all samples on chunk 0 at h_q 128
#       s_q 2. Prediction: -1..-2 % at 256 rows, 0..-1 % at 128), three
#       interleaved rounds at page 64; then page 32 with consecutive page ids (MLA_SEQ=1), one box per page
#       (default) against the page-run copies (FLASHKIT_MLA_PAGE_RUNS=32, read by the launcher; ~2 % slower at
#       v17, worth a retry with v20's page-16/32 layout). Predictions: lateids 0..-0.5 %; runs at page 32 -1..-3 %.
#   run(carry=[".carry/mlabin"], command="bash scripts/dev/next_session18.sh M")
#   Q (~4 min): wip/decode-q-shift against main (next_session16.sh Q). .carry/cur (= the branch) and .carry/old (= main
#       at 9b484b3; decode code unchanged since) were rebuilt on 2026-11-28.
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp}/m; mkdir -p "$O"
case "${1:-M}" in
  M)
    NCU= ROUNDS=3 CFGS="128 2 16384;128 2 4096;128 1 8192;64 2 8192;16 1 16384;32 2 4096" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1
    B=.carry/mlabin/mla_v21
    for r in 1 2 3; do
      for c in "64 1 16384 32" "128 2 8192 32" "32 2 4096 32" "16 1 16384 32" "128 1 8192 32"; do
        echo "r$r box  $(MLA_SEQ=1 timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/page32.txt"
        echo "r$r runs $(MLA_SEQ=1 FLASHKIT_MLA_PAGE_RUNS=32 timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/page32.txt"
      done
    done
    tar -czf "${OUT:-/tmp}/m.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 M" >&2; exit 2 ;;
esac
