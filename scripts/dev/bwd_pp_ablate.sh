#!/usr/bin/env bash
# Timing-only ablation of the ping-pong backward (D 64 / 128): applies
# scripts/dev/patches/bwd_pp_ablate.patch to the carried tree (results are wrong and the bench
# flags them), then bwd_define_ab.sh over base / no dQ reduce-adds / S^T,dP^T cut to one k-step,
# S 4k and 16k, fast mode. Says how much of a step the dQ adds cost there (at D 256 they were
# half of it: docs/kernels/bwd.md, "D 256: the key-split kernel").
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_pp_ablate.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
(cd "$TREE" && patch -p1 -s < scripts/dev/patches/bwd_pp_ablate.patch) || exit 1
INSTS="bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128" DIMS="64 128" ROUNDS=${ROUNDS:-1} BENCH_ARGS="--seqlens 4096 16384" \
  bash "$TREE/scripts/dev/bwd_define_ab.sh" base= nodq='FLASHKIT_BWD_PP_ABLATE 1' nosdp='FLASHKIT_BWD_PP_ABLATE 4' \
  nodqsdp='FLASHKIT_BWD_PP_ABLATE 5'
