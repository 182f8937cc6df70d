#!/usr/bin/env bash
# Device A/B of backward compile-time variants: fwd_define_ab.sh on the backward's instantiation
# files (INSTS, default the bf16 D 256 one; DIMS default 256), bench mode bwd, no peers, no checks;
# ROUNDS (default 2) interleaved rounds, BENCH_ARGS passed on. The files are restored at the end;
# the last build is the last argument's.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_define_ab.sh old='FLASHKIT_BWD_KS_STATS_ASYNC 0' new=")
exec env FAMILY=bwd_sm90 MODE=bwd PEERS= CHECKS=0 OUT_NAME=bwddef INSTS="${INSTS:-bwd_sm90_bf16_hd256}" \
  DIMS="${DIMS:-256}" ROUNDS="${ROUNDS:-2}" bash "$(dirname "$0")/fwd_define_ab.sh" "$@"
