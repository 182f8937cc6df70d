#!/usr/bin/env bash
# Scans the SASS of a built FlashKit library (or any cubin / shared object) for LDGSTS
# (cp.async) instructions whose cache-policy descriptor sits in an odd uniform register
# (desc[UR<odd>]): ptxas of CUDA 13.0 emits that form for the hinted copies of the 8-bit
# decode kernels at D 64 / 256, and such a kernel faults with an illegal instruction
# (docs/kernels/decode.md v11). Exit 1 and the kernel names if any is found.
#   bash scripts/dev/check_ldgsts_desc.sh path/to/libflashkit.so
set -u -o pipefail
f=${1:?usage: check_ldgsts_desc.sh LIB_OR_CUBIN}
out=$(cuobjdump -sass "$f" | awk '/Function :/{fn=$3} /LDGSTS/ && /desc\[UR[0-9]*[13579]\]/{c[fn]++} END{for (k in c) print c[k], k}')
if [ -n "$out" ]; then
  echo "LDGSTS with an odd uniform descriptor register (count, kernel):"
  echo "$out"
  exit 1
fi
echo "no LDGSTS with an odd uniform descriptor register in $f"
