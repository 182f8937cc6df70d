#!/usr/bin/env bash
# Scans the sm_90a SASS of a built FlashKit library (or any binary with the MLA kernels) for the
# Hopper MLA split kernel's scale-barrier arrivals (BAR.ARV 0x1: warpgroup 0, 0x2: warpgroup 1; the
# other warpgroup waits at the matching BAR.SYNC). Between each of them and the instruction that
# starts its softmax (the previous BAR.SYNC, wgmma wait or wgmma) at most 4 MUFU.EX2 may sit: the
# running-max update's two. ptxas used to hoist the softmax's 32 exponentials above the arrival,
# and the other warpgroup waited for them (docs/kernels/mla.md, "Arrive first": 1.6-2.5 % of the
# compute-bound rows). Exit 1, with the kernels and counts, if an arrival has more.
#   bash scripts/check_sass_mla_arrive.sh path/to/libflashkit.so   (the CTest sass_mla_arrive)
# CUOBJDUMP names the tool (default: cuobjdump on the PATH).
set -u -o pipefail
f=${1:?usage: check_sass_mla_arrive.sh LIB_OR_BINARY}
sass=$("${CUOBJDUMP:-cuobjdump}" -sass "$f") || { echo "cuobjdump failed on $f" >&2; exit 2; }
out=$(printf '%s\n' "$sass" | awk '
  function finish(   i, j, mu, nb) {
    if (fn == "" || (arch != "" && arch != "sm_90a") || fn !~ /mla_sm90.*mla_split_kernel/) return
    nb = 0
    for (i = 1; i <= n; i++) {
      if (kind[i] != "A") continue
      nb++; mu = 0
      for (j = i - 1; j >= 1 && kind[j] != "S" && kind[j] != "A"; j--) if (kind[j] == "M") mu++
      if (mu > 4) printf "%s %s: %d MUFU.EX2 before %s\n", arch, fn, mu, what[i]
    }
    if (nb > 0) checked++
  }
  /^[ \t]*arch = /{ finish(); fn = ""; n = 0; arch = $3; if (arch == "sm_90a") h90++ }
  /Function :/{ finish(); fn = $3; n = 0; next }
  /\/\*[0-9a-f]+\*\// {
    n++; kind[n] = ""
    if ($0 ~ /MUFU\.EX2/) kind[n] = "M"
    else if ($0 ~ /BAR\.ARV 0x[12],/) { kind[n] = "A"; what[n] = ($0 ~ /0x1,/) ? "BAR.ARV 0x1" : "BAR.ARV 0x2" }
    else if ($0 ~ /BAR\.SYNC|BAR\.ARV|WARPGROUP\.DEPBAR|HGMMA/) kind[n] = "S"
  }
  END { finish(); printf "checked %d\n", checked; printf "sm90a %d\n", h90 }')
. "$(dirname "$0")/sass_check_report.sh"
sass_check_report "$out" "$sass" "$f" \
  "MLA softmax exponentials scheduled ahead of the scale-barrier arrival (arch, kernel, count):" \
  "no Hopper MLA split kernel found in the sm_90a code of $f (nothing checked)" \
  "MLA scale-barrier arrivals ahead of the exponentials"
