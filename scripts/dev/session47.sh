#!/usr/bin/env bash
# Device call of the forty-fifth session (2026-11-29) after flipping two defaults measured that day on an H200:
# FLASHKIT_DECODE_NARROW16 1 (decode) and FLASHKIT_BWD_PP_STSM_DS 1 (backward D 64 / 96 / 128).
# Install; the decode GPU tests and the D 64 / 96 / 128 backward tests on the new defaults; then the results file's
# backward rows at D 64 / 128 with the peers (bwd and fwd_bwd; tag v20). ~6 min.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session47.sh", timeout_s=600)
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s47
. "$(dirname "$0")/device_steps.sh"
watchdog_start "${PACK_AT:-570}"
install_tree "$TREE"
(cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
  test_decode_gpu.py test_backward_gpu.py -k "decode or narrow or D64 or D96 or D128")
pack
(cd /tmp && step bwd 330 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd fwd_bwd \
  --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag v20 --no-plot)
pack
watchdog_stop; exit 0
