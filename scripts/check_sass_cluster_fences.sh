#!/usr/bin/env bash
# Scans the sm_90a SASS of a built FlashKit library (or a cubin) for GPU-scope fences inside the main loop of the
# Hopper forward's cluster kernels (fwd_kernel_persistent<.., kMods = false, kCluster = true>, K / V multicast in
# clusters of two): no MEMBAR.ALL.GPU between the kernel's first and last HGMMA. A `.release.cluster` mbarrier
# arrival compiles to one, and the pair releases with it made the kernel 25-38 % slower (docs/kernels/fwd_sm90.md,
# "K / V multicast in clusters of two"); the cluster barriers at the start and the end may have theirs. Exit 1, with
# the kernels and counts, if a kernel has one there.
#   bash scripts/check_sass_cluster_fences.sh path/to/libflashkit.so   (the CTest sass_cluster_fences)
# CUOBJDUMP names the tool (default: cuobjdump on the PATH).
set -u -o pipefail
f=${1:?usage: check_sass_cluster_fences.sh LIB_OR_CUBIN}
sass=$("${CUOBJDUMP:-cuobjdump}" -sass "$f") || { echo "cuobjdump failed on $f" >&2; exit 2; }
out=$(printf '%s\n' "$sass" | awk '
  function finish(   i, first, last, nm) {
    if (fn == "" || arch != "sm_90a" || fn !~ /fwd_kernel_persistent.*ELb0ELb1EEEvNS_9FwdParamsE/) return
    first = 0; last = 0; nm = 0
    for (i = 1; i <= n; i++) if (kind[i] == "H") { if (!first) first = i; last = i }
    if (!first) return
    for (i = first; i <= last; i++) if (kind[i] == "M") nm++
    if (nm > 0) printf "%s %s: %d MEMBAR.ALL.GPU between its first and last HGMMA\n", arch, fn, nm
    checked++
  }
  /^[ \t]*arch = /{ finish(); fn = ""; n = 0; arch = $3; if (arch == "sm_90a") h90++ }
  /^[ \t]*code for sm_/{ finish(); fn = ""; n = 0; arch = $3; if (arch == "sm_90a") h90++ }
  /Function :/{ finish(); fn = $3; n = 0; next }
  /\/\*[0-9a-f]+\*\// {
    n++; kind[n] = ""
    if ($0 ~ /MEMBAR\.ALL\.GPU/) kind[n] = "M"
    else if ($0 ~ /HGMMA/) kind[n] = "H"
  }
  END { finish(); printf "checked %d\n", checked; printf "sm90a %d\n", h90 }')
. "$(dirname "$0")/sass_check_report.sh"
sass_check_report "$out" "$sass" "$f" \
  "GPU-scope fences in the main loop of the forward's cluster kernels (arch, kernel, count):" \
  "no Hopper forward cluster kernel found in the sm_90a code of $f (nothing checked)" \
  "no GPU-scope fence in the main loop"
