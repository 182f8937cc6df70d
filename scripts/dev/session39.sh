#!/usr/bin/env bash
# Device calls of the thirty-ninth session (2026-11-29), H200.
#   A: the peers' kernels beside ours (peer_ncu_survey.sh: forward D 128 at 512 / 16k, backward D 128 16k / 2k causal
#      and D 64 16k; names, launch configuration, L2 / DRAM traffic), then the MLA cache map's L2 promotion at pages of
#      32 tokens (FLASHKIT_MLA_L2_PROMO 256, the rule, against 128; ROUNDS interleaved rounds; mla.md "What is left").
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session39.sh A")
set -u -o pipefail
PARTS=${1:?usage: session39.sh A}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s39
. "$(dirname "$0")/device_steps.sh"
pack() { tar -czf "${OUT:-/tmp}/s39.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
mla_env_ab() {
  local var=$1 tag=$2 vals=$3 args=$4 r v
  export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
  for r in $(seq 1 ${ROUNDS:-2}); do
    for v in $vals; do
      (cd /tmp && step mla_${tag}${v}_$r 300 env $var=$v python3 -m flashkit.bench --op mla --impls flashkit \
        $args --out-dir "$O/mla_${tag}${v}_$r" --no-plot); pack
    done
  done
}
if [[ $PARTS == *A* ]]; then
  install_tree "$TREE"; pack
  O="$O/survey" bash "$TREE/scripts/dev/peer_ncu_survey.sh"; pack
  mla_env_ab FLASHKIT_MLA_L2_PROMO promo32_ "256 128" \
    "${MLA_ARGS:-"--heads 16 32 64 --sq 1 2 --seqlens 4096 16384 --modes fixed --page-sizes 32"}"
fi
pack
