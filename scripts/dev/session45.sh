#!/usr/bin/env bash
# Device calls of the forty-fourth session (2026-11-29), after session44.sh's A/B rounds moved two defaults:
# the grid kernel's TMA stores on (FLASHKIT_FWD_GRID_TMA_STORE 1) and the backward pair kernel's launch rules
# (D 256: S_k >= 2k or unmasked >= 512; D 192: fast unmasked >= 512 / masked >= 1k, fixed point unmasked >= 512 /
# masked >= 2k).
#   A: install; the backward family tests, the backward tests at D 192 / 256, the forward tests at D 256; then two
#      interleaved rounds of D 192 at S 8k / 16k (fast and deterministic), the new rules against
#      FLASHKIT_BWD_KS_PAIR=0 (the old D 192 fixed-point rule: never the pairs) -- the rule's untested range; then
#      the backward results at D 256 with the peers (tag $BWD_TAG). ~8 min.
#   B: the dims sweep's backward results (D 96 / 192) with the peers and the deterministic mode, then the forward
#      FA3 sweep with the peers (tag $FWD_TAG). ~6 min.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session45.sh A", timeout_s=600), then B.
set -u -o pipefail
PARTS=${1:?usage: session45.sh A|B}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s45
. "$(dirname "$0")/device_steps.sh"
device_header
watchdog_start "${PACK_AT:-560}"
install_cmd "$TREE"; step install 400 "${INSTALL[@]}"
if [[ $PARTS == *A* ]]; then
  (cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step test_bwd_fam 200 python3 -m pytest -q -m gpu -n 6 \
    -p no:cacheprovider test_backward_families_gpu.py)
  (cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step test_bwd 200 python3 -m pytest -q -m gpu -n 6 \
    -p no:cacheprovider test_backward_gpu.py -k "192 or 256")
  (cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step test_fwd_d256 100 python3 -m pytest -q -m gpu -n 6 \
    -p no:cacheprovider test_attention_gpu.py -k "D256")
  pack
  for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
    order="rule off"; [ $((r % 2)) = 0 ] && order="off rule"
    for n in $order; do
      e=""; [ $n = off ] && e="FLASHKIT_BWD_KS_PAIR=0"
      (cd /tmp && step "r192_$n$r" 90 env $e python3 -m flashkit.bench --sweep dims --heads-dims 192 --seqlens 8k 16k \
        --mode bwd --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "r192-$n$r" --no-plot)
    done
    pack
  done
  (cd /tmp && step bwd256 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd fwd_bwd \
    --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag "${BWD_TAG:-v19}" --no-plot)
fi
if [[ $PARTS == *B* ]]; then
  (cd /tmp && step bwd_dims 250 python3 -m flashkit.bench --sweep dims --mode bwd fwd_bwd \
    --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag dims-bwd --no-plot)
  pack
  (cd /tmp && step fwd_bf16 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 \
    --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag "${FWD_TAG:-v14}" --no-plot)
  pack
  (cd /tmp && step fwd_fp16 120 python3 -m flashkit.bench --sweep fa3 --quick --dtype fp16 --impls flashkit sdpa_cudnn \
    --out-dir "$O/bench" --tag "${FWD_TAG:-v14}-fp16" --no-plot)
fi
pack
watchdog_stop; exit 0
