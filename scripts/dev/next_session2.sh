#!/usr/bin/env bash
# The device calls prepared on 2026-11-27 (eleventh session) for branch wip/next-session-2 (=
# wip/ks-det-rotate + wip/bwd-pp-trace + wip/cluster-prims on main), two calls of the 10-minute limit:
#   A  scripts/dev/ks_next.sh: the D 256 staging fix (define A/B) and the rotated deterministic walk
#      (env A/B), with the D 256 / residency tests, memcheck and racecheck (~7 min)
#   B  scripts/dev/bwd_pp_trace.sh (the D 64 / 128 step timeline, ~3 min), then
#      scripts/dev/cluster_probe.sh (cluster / DSMEM hand-offs, ~1 min)
#   C  (branch wip/ks-pair, which contains all of the above) scripts/dev/ks_pair_ab.sh: the D 256
#      pair kernel's tests, A/B and sanitizers (~7 min)
# Carry branch wip/ks-pair (it contains wip/next-session-2) for all three calls:
#   rm -rf .carry/cur && mkdir -p .carry/cur && git archive wip/ks-pair | tar -x -C .carry/cur
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/next_session2.sh A")
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/next_session2.sh B")
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/next_session2.sh C")
# Outputs: A -> ksnext.tgz, B -> b.tgz, C -> kspair.tgz (only ~8 files come back from $OUT: read the tarballs).
set -u -o pipefail
D=$(dirname "$0")
case "${1:-A}" in
  A) bash "$D/ks_next.sh" ;;
  B) bash "$D/bwd_pp_trace.sh"; bash "$D/cluster_probe.sh"
     tar -czf "${OUT:-/tmp}/b.tgz" -C "${OUT:-/tmp}" pptrace cluster ;;
  C) bash "$D/ks_pair_ab.sh" ;;
esac
