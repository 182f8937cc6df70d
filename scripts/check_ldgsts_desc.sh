#!/usr/bin/env bash
# Scans the SASS of a built FlashKit library (or any cubin / shared object) for LDGSTS
# (cp.async) instructions whose 64-bit cache-policy descriptor sits in an odd uniform
# register (desc[UR<odd>]). ptxas of CUDA 13.0 emits that form for the hinted copies of the
# 8-bit decode kernels at D 64 / 256 (sm_90a) and in the sm_80 code of the int8 D 128 ones;
# on an H100 such a kernel faults with an illegal instruction (docs/kernels/decode.md v11). It did again on an H200 in
# 2026-11-29's first build of the 16-bit narrow decode kernels (decode.md "The narrow form for the 16-bit caches").
# Exit 1, with the architecture and kernel names, if any is found.
#   bash scripts/check_ldgsts_desc.sh path/to/libflashkit.so   (the CTest sass_ldgsts_descriptor)
# CUOBJDUMP names the tool (default: cuobjdump on the PATH).
set -u -o pipefail
f=${1:?usage: check_ldgsts_desc.sh LIB_OR_CUBIN}
sass=$("${CUOBJDUMP:-cuobjdump}" -sass "$f") || { echo "cuobjdump failed on $f" >&2; exit 2; }
out=$(printf '%s\n' "$sass" | awk '/^[ \t]*arch = /{arch=$3} /Function :/{fn=$3}
  /LDGSTS/ && /desc\[UR[0-9]*[13579]\]/{c[arch " " fn]++} END{for (k in c) print c[k], k}')
# (a listing without any LDGSTS means the scan saw nothing: every build has cp.async kernels)
if ! grep -q LDGSTS <<< "$sass"; then  # (a here-string: grep -q in a pipe would SIGPIPE the printf, and pipefail)
  echo "no LDGSTS at all in the SASS of $f: nothing was checked" >&2
  exit 1
fi
if [ -n "$out" ]; then
  echo "LDGSTS with an odd uniform descriptor register (count, arch, kernel):"
  echo "$out"
  exit 1
fi
echo "no LDGSTS with an odd uniform descriptor register in $f"
