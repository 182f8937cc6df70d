#!/usr/bin/env bash
# Builds the dev-harness variants (scripts/dev/mla_sm90_check.cu + the bf16 Hopper kernel) for
# (both bf16 instantiation files, if the tree has the box64 one) for
# scripts/dev/mla_variants.sh: VARIANTS="name:-DX=1 -DY=2;name2:..." into DEST (default
# .carry/mlabin). Runs here (nvcc, no GPU needed) or on the GPU machine.
set -eu
R=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${DEST:-$R/.carry/mlabin}
mkdir -p "$DEST"
IFS=';' read -r -a VS <<< "${VARIANTS:-base:}"
for v in "${VS[@]}"; do
  name=${v%%:*}; defs=${v#*:}
  nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I"$R/include" -I"$R/src" \
    -I"$R/build/dev2/generated" $defs "$R/scripts/dev/mla_sm90_check.cu" "$R/src/kernels/mla/inst/mla_sm90_bf16.cu" "$R/src/kernels/mla/inst/mla_sm90_bf16_box64.cu" \
    -o "$DEST/mla_$name" 2>&1 | grep -v C75 | grep -E "error|warning" || true &
  while [ "$(jobs -r | wc -l)" -ge "${JOBS:-2}" ]; do sleep 1; done
done
wait
ls -la "$DEST"
