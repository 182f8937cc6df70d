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
    python3 "$D/ncu_source_diff.py" <(zcat "${OUT:-/tmp}/ncu/src.csv.gz") <(zcat "${OUT:-/tmp}/ncu/src.csv.gz") \
      > "${OUT:-/tmp}/stalls_box64.txt" 2>&1
    ;;
  R)
    # The whole-box / run copies with lane 0's coordinates by __reduce_max_sync (uniform registers) instead of
    # shuffles (FLASHKIT_MLA_REDUX): mla_v19 (main), mla_box64 (REDUX=0), mla_redux. Pages 64 and 16.
    # Prediction: -0.5..-1% where compute-bound (ELECT / BRA.U.ANY loops around each copy gone).
    for b in .carry/mlabin/mla_*; do
      echo "$b: ELECT $(/usr/local/cuda/bin/cuobjdump -sass "$b" | grep -c ELECT) BRA.U.ANY $(/usr/local/cuda/bin/cuobjdump -sass "$b" | grep -c 'BRA.U.ANY') UTMALDG $(/usr/local/cuda/bin/cuobjdump -sass "$b" | grep -c UTMALDG)"
    done > "${OUT:-/tmp}/sass_counts.txt" 2>&1
    ROUNDS=2 CFGS="16 1 16384;64 1 16384;128 1 8192;128 2 16384;128 2 4096;64 2 8192 16;128 2 8192 16;16 1 16384 16" \
      NCU_CFGS="128 2 8192" bash "$D/mla_ab_ncu.sh"
    ;;
  P)
    # mla_box64b: the page-16/32 kernel keeps v19's run-time whole-box branch (box64 measured 1-3 % slower at
    # page 16 without it). Its SASS against v19's (should be the same), then timings at pages 64 and 16.
    CU=/usr/local/cuda/bin/cuobjdump
    for b in v19 box64b; do
      $CU -sass -fun '_ZN8flashkit8mla_sm9016mla_split_kernelINS0_6TraitsI13__nv_bfloat16Lb1ELb0EEEEEvNS_9MlaParamsE' \
        .carry/mlabin/mla_$b | grep -E '^ +/\*[0-9a-f]{4,}\*/' | sed 's@/\*[0-9a-f]*\*/@@; s@;.*@@' > /tmp/sass_$b.txt
      $CU -sass .carry/mlabin/mla_$b | grep -c ':' > /dev/null
      echo "$b: $(wc -l < /tmp/sass_$b.txt) instructions in the Traits<bf16, true, false> kernel"
    done > "${OUT:-/tmp}/sass_p16.txt" 2>&1
    diff /tmp/sass_v19.txt /tmp/sass_box64b.txt | head -40 >> "${OUT:-/tmp}/sass_p16.txt"
    NCU= ROUNDS=3 CFGS="16 1 16384 16;64 2 8192 16;128 2 8192 16;128 1 8192 16;16 1 16384;128 1 8192;128 2 16384" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1
    ;;
  L)
    # Page-16/32 kernel layouts (branch wip/mla-p16-layout, FLASHKIT_MLA_P16_LAYOUT, removed after the run: l1 shipped): mla_v20 (main), l1 (no
    # whole-box branch), l2 (the run copy marked likely), l3 (both). Prediction: 0..-3 % at page 16 for l2/l3.
    NCU= ROUNDS=3 CFGS="16 1 16384 16;64 2 8192 16;128 2 8192 16;128 1 8192 16;32 2 4096 16;64 1 16384 32;128 2 8192 32" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1
    mv "${OUT:-/tmp}/mla/perf.txt" "${OUT:-/tmp}/mla/perf_shuffled.txt"
    MLA_SEQ=1 CHECK= NCU= ROUNDS=3 CFGS="16 1 16384 16;64 2 8192 16;128 2 8192 16;128 1 8192 16;32 2 4096 16;64 1 16384 32" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants_seq.log" 2>&1
    ;;
  A)
    # Branch wip/mla-arrive-first (FLASHKIT_MLA_ARRIVE_FIRST): ptxas had scheduled each softmax's 32 MUFU.EX2
    # (and warpgroup 0's O rescale) ahead of the scale barrier's BAR.ARV, so the other warpgroup waited at its
    # BAR.SYNC for them (7.3 k stall_barrier samples on the two instructions after them, 7.5 %). With a shared
    # load of 0 after the arrival feeding them, they cannot move. mla_v21 (0), mla_arv (1).
    # Prediction: -2..-5 % where compute-bound, 0..-1 % memory-bound.
    for b in v21 arv; do
      /usr/local/cuda/bin/cuobjdump -sass .carry/mlabin/mla_$b | awk -v B=$b '
        /Function :/ {fn=$3} {line[NR]=$0}
        /BAR.ARV/ && fn ~ /Lb1ELb1/ { n=0; for (i=NR-80;i<NR;i++) if (line[i] ~ /MUFU.EX2/) n++; print B, "MUFU.EX2 in the 80 lines before", $0, ":", n }'
    done > "${OUT:-/tmp}/sass_arv.txt" 2>&1
    NCU= ROUNDS=3 CFGS="128 2 16384;128 2 4096;128 1 8192;64 2 8192;16 1 16384;32 2 4096" \
      bash "$D/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1
    ;;
  *) echo "usage: $0 B|R|P|L|A" >&2; exit 2 ;;
esac
