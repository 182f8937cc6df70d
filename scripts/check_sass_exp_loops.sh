#!/usr/bin/env bash
# Scans the sm_90a SASS of a built FlashKit library (or a cubin) for the backward ping-pong
# kernels' P = exp2(S - lse) loop: in every instantiation without softcap, at least 3/4 of the
# loop's exp2 (MUFU.EX2) instructions of one copy (M / 2 per thread, M = the kernel's row block)
# must be "unfragmented", i.e. not followed by a branch within 6 instructions. With the per-element
# mask test inside the loop, ptxas ended a basic block after every element (no MUFU.EX2 of those
# kernels was unfragmented) and the backward ran 13-17% slower (docs/kernels/bwd.md, "The P loop
# unswitched"). The D 256 key-split and pair kernels (FLASHKIT_BWD_KS_EXP_UNSWITCH): at least 8 of
# the 16 of their unmasked copy (their old loop had none). Exit 1, with the kernels and counts, if a
# kernel falls short.
#   bash scripts/check_sass_exp_loops.sh path/to/libflashkit.so   (the CTest sass_exp_loops)
# CUOBJDUMP names the tool (default: cuobjdump on the PATH).
set -u -o pipefail
f=${1:?usage: check_sass_exp_loops.sh LIB_OR_CUBIN}
sass=$("${CUOBJDUMP:-cuobjdump}" -sass "$f") || { echo "cuobjdump failed on $f" >&2; exit 2; }
out=$(printf '%s\n' "$sass" | awk '
  function finish(   i, next_bra, free, total, need, m) {
    if (fn == "" || (arch != "" && arch != "sm_90a")) return
    if (fn ~ /bwd_pp_kernel/ && fn ~ /BwdPpTraits/) {
      m = fn; sub(/.*BwdPpTraitsI[^L]*Li[0-9]+ELi/, "", m); sub(/E.*/, "", m)   # the row block M
      need = int(3 * (m / 2) / 4)
    } else if (fn ~ /bwd_ks(_pair)?_kernel/ && fn ~ /BwdKs(Pair)?Traits/) {
      need = 8   # D 256: 16 exp2 a thread and tile; ptxas keeps 10-13 of the unmasked copy unfragmented
    } else return
    if (fn ~ /EEELb1E/) return                                      # softcap kernels keep the old loop
    next_bra = 1e9; free = 0; total = 0
    for (i = n; i >= 1; i--) {
      if (kind[i] == "B") next_bra = i
      else if (kind[i] == "M") { total++; if (next_bra - i > 6) free++ }
    }
    checked++
    if (free < need) printf "%s %s: %d of %d MUFU.EX2 unfragmented, need %d\n", arch, fn, free, total, need
  }
  /^[ \t]*arch = /{ finish(); fn = ""; n = 0; arch = $3; if (arch == "sm_90a") h90++ }
  /Function :/{ finish(); fn = $3; n = 0; next }
  /\/\*[0-9a-f]+\*\// { n++; kind[n] = ($0 ~ /MUFU\.EX2/) ? "M" : (($0 ~ /[ \t]BRA[ \t.]/) ? "B" : "") }
  END { finish(); printf "checked %d\n", checked; printf "sm90a %d\n", h90 }')
. "$(dirname "$0")/sass_check_report.sh"
sass_check_report "$out" "$sass" "$f" \
  "backward exp2 loops fragmented by branches (arch, kernel, counts):" \
  "no backward ping-pong / key-split kernel without softcap found in the sm_90a code of $f (nothing checked)" \
  "backward exp2 loops unfragmented"
