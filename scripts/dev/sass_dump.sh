#!/usr/bin/env bash
# Device run: SASS of the main Hopper kernels for offline reading (this machine has no cuobjdump /
# nvdisasm): install, then cuobjdump -sass of the object files named in $FILES (default: the bf16
# MLA, forward D128, decode D128 16-bit and 8-bit, combine/plan, backward D128 instantiations),
# each gzipped, plus per-file counts of a few instruction kinds (R2UR, HGMMA, UIADD3, IMAD, BAR,
# SYNCS) per function. Output: $OUT/sass.tgz.
#   run(command="bash scripts/dev/sass_dump.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/sass
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
FILES=${FILES:-"mla_sm90_bf16.cu fwd_sm90_bf16_hd128.cu decode_bf16_hd128.cu decode_q_bf16_hd128.cu decode_aux.cu bwd_sm90_bf16_hd128.cu"}
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
echo "cuobjdump: $CUOBJ" >> "$O/summary.txt"
for f in $FILES; do
  obj=$(find "$TREE/build/gpu" -name "$f.o" | head -1)
  if [ -z "$obj" ]; then echo "FAIL no object for $f" >> "$O/summary.txt"; continue; fi
  "$CUOBJ" -sass "$obj" > "$O/$f.sass" 2>> "$O/summary.txt"
  awk -v F="$f" '/Function :/ {fn=$3} /R2UR|HGMMA|UIADD3|IMAD|BAR\.|SYNCS|WARPSYNC|UTMALDG|LDGSTS/ {
      for (i = 1; i <= NF; i++) if ($i ~ /^(R2UR|HGMMA|UIADD3|IMAD|BAR|SYNCS|UTMALDG|LDGSTS)/) { split($i, a, "."); c[fn "|" a[1]]++; break } }
    END { for (k in c) print F, k, c[k] }' "$O/$f.sass" | sort >> "$O/counts.txt"
  gzip -f "$O/$f.sass"
done
tar -czf "${OUT:-/tmp}/sass.tgz" -C "$(dirname "$O")" "$(basename "$O")"
