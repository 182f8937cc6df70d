#!/usr/bin/env bash
# Device call prepared in the forty-fifth session (2026-11-29, compile only; the file is named for the next free number) for the next one, H200 (or H100).
# D 64's 128-row backward step loop with fewer instructions (bwd.md, "D 64's step loop: fewer instructions";
# kernel_pp.cuh, three macros, default 0; LSE2 reaches only the 128-row kRowSplit kernels, MASK_THR those and D 96 /
# 128's 64-row ones (bwd.md, "MASK_THR in D 96 / 128's 64-row kernels"), DP_DELTA every ping-pong kernel without a
# softcap):
#   FLASHKIT_BWD_PP_LSE2 1      warpgroup 0 rewrites the stage's lse as lse * log2(e) (-inf -> +inf) once per row
#                               block; the P loops lose their 32 FMUL a step (the masked copy also 32 FSETP + 32 FSEL)
#   FLASHKIT_BWD_PP_MASK_THR 1  the masked copy tests each element against per-key column bounds (compares and a
#                               select) instead of Mask::visible's sums, compares and branches (~560 instructions fewer
#                               at D 64's 128 rows; D 96 / 128's 64 rows: the masked copy ~495 -> ~220)
#   FLASHKIT_BWD_PP_DP_DELTA 1  dP^T accumulates onto delta with V negated: the dS phase (dP^T -> dS^T store -> gate B)
#                               loses its delta LDS.64 and FADD (D 64's 128 rows: ~80 of ~260 instructions; D 96 / 128's
#                               64 rows: ~44 of ~155)
# The six hd64 / 96 / 128 bf16 / fp16 instantiation files built both ways (pip --target, once each: base = the tree,
# new = the three macros; ARMS="base new lse mthr dpd" adds one arm per macro alone, ~1.5 min each: at
# most one more in a 600 s call); on the new build the D 64 / 96 / 128 backward and family tests, memcheck / racecheck
# / synccheck of sanitize_bwd.py --quick --dims 64 96 128; then ROUNDS (2) interleaved rounds of the FA3 sweep's D 64 /
# 128 backward, fast and deterministic (the D 128 rows: DP_DELTA and MASK_THR in the 64-row kernel; MASK_THR runs only
# on masked tiles, so the non-causal rows are DP_DELTA alone). ~8 min with two arms.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session48.sh", timeout_s=600)
# Then: python3 scripts/dev/ab_medians.py <files_at>/s48/bench c-base c-new (and c-base c-lse, c-mthr, c-dpd).
# Prediction (bwd.md): D 64 +2..4 % fast, +1..2 % fixed point on the non-causal rows (mostly DP_DELTA); causal rows
# that plus MASK_THR's share (S 512 +4..8 %, 1k +2..4 %, 2k +1..2.5 %, 4k and up < 1 %); D 128 0..+1 % on every row
# (DP_DELTA), the causal rows MASK_THR's share on top (S 512 +0.5..4 %, 1k +0.3..2 %, 2k +0.2..1.2 %, 4k and up within
# noise); no row below the base's spread.
# Note: FLASHKIT_BWD_PP_MASK_THR also switches D 192 / 256's key-split and pair kernels (ks_fragments.cuh's ks_probs;
# bwd.md, "MASK_THR in D 256's key-split kernels"), but this script defines it only in the hd64 / 96 / 128 files: D 256
# (and D 192) need their own A/B (the hd192 / hd256 files with the macro at 1, the FA3 sweep's D 256 rows).
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s48
. "$(dirname "$0")/device_steps.sh"
watchdog_start "${PACK_AT:-560}"
install_tree "$TREE"
D=$TREE/src/kernels/bwd_sm90/inst
ARMS=${ARMS:-base new}
VARIANTS="base=|new=FLASHKIT_BWD_PP_LSE2 1;FLASHKIT_BWD_PP_MASK_THR 1;FLASHKIT_BWD_PP_DP_DELTA 1"
[[ " $ARMS " == *" lse "* ]] && VARIANTS="$VARIANTS|lse=FLASHKIT_BWD_PP_LSE2 1"
[[ " $ARMS " == *" mthr "* ]] && VARIANTS="$VARIANTS|mthr=FLASHKIT_BWD_PP_MASK_THR 1"
[[ " $ARMS " == *" dpd "* ]] && VARIANTS="$VARIANTS|dpd=FLASHKIT_BWD_PP_DP_DELTA 1"
inst_variants "$(for t in bf16 fp16; do for d in 64 96 128; do printf '%s ' "$D/bwd_sm90_${t}_hd$d.cu"; done; done)" \
  "$VARIANTS" 400
(cd "$TREE/tests/python" && PYTHONPATH=/tmp/pkg_new OMP_NUM_THREADS=2 step tests_new 300 python3 -m pytest -q -m gpu \
  -n 6 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py -k "D64 or D96 or D128 or d64 or d96 or d128 or pp")
sanitizer_steps new "PYTHONPATH=/tmp/pkg_new" "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 96 128
pack
for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
  order=$ARMS; [ $((r % 2)) = 0 ] && order=$(echo $ARMS | tr ' ' '\n' | tac | tr '\n' ' ')
  for n in $order; do
    (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "bwd_$n$r" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 \
      --mode bwd --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "c-$n$r" --no-plot)
  done
  pack
done
pack
watchdog_stop; exit 0
