#!/usr/bin/env bash
# Device call of the forty-second session (2026-11-29): K / V multicast in clusters of two (FLASHKIT_FWD_CLUSTER=1,
# fwd_sm90.md "K / V multicast in clusters of two"). Build, the bitwise test against one CTA per SM (with the fp32
# reference), then ROUNDS interleaved rounds of the FA3 D 128 non-causal rows off / on (the same build: the switch is
# read once per process), then the dims sweep's D 96 / 192 non-causal rows off / on.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session42_cluster.sh", timeout_s=600)
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s42c
. "$(dirname "$0")/device_steps.sh"
watchdog_start "${PACK_AT:-200}"
install_tree "$TREE"
pack
(cd "$TREE/tests/python" && step test_cluster 90 python3 -m pytest -q -m gpu -p no:cacheprovider \
  test_kernel_families_gpu.py -k "cluster_multicast or tma_loads_match")
pack
for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
  for v in off on; do
    e=""; [ $v = on ] && e="FLASHKIT_FWD_CLUSTER=1"
    (cd /tmp && step "fa3_$v$r" 60 env $e python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --causal no \
      --impls flashkit --out-dir "$O/bench" --tag "fa3-$v$r" --no-plot)
    pack
  done
done
for v in off on; do
  e=""; [ $v = on ] && e="FLASHKIT_FWD_CLUSTER=1"
  (cd /tmp && step "dims_$v" 60 env $e python3 -m flashkit.bench --sweep dims --causal no --impls flashkit \
    --out-dir "$O/bench" --tag "dims-${v}1" --no-plot)
  pack
done
watchdog_stop; exit 0
