#!/usr/bin/env bash
# Timing-only ablation of the D 256 key-split backward's dQ path (after the TMA reduce-adds and
# the Q/dO TMA loads): applies scripts/dev/patches/bwd_ks_ablate.patch to the carried tree
# (results are wrong and the bench flags them), then bwd_define_ab.sh over base / no reduce-adds /
# no wait for a box's previous read / no dQ staging at all; S 1k, 4k, 16k, fast mode.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_ks_ablate.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
(cd "$TREE" && patch -p1 -s < scripts/dev/patches/bwd_ks_ablate.patch) || exit 1
INSTS="bwd_sm90_bf16_hd256" DIMS="256" ROUNDS=${ROUNDS:-1} BENCH_ARGS="--seqlens 1024 4096 16384" \
  bash "$TREE/scripts/dev/bwd_define_ab.sh" base= nodq='FLASHKIT_BWD_KS_ABLATE 1' nowait='FLASHKIT_BWD_KS_ABLATE 2' \
  nostage='FLASHKIT_BWD_KS_ABLATE 8'
