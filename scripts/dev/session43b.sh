#!/usr/bin/env bash
# Device call of the forty-third session (2026-11-29) after session43.sh A / B / C: the two defaults that the rounds
# supported (FLASHKIT_BWD_PAIR_CTA_SCOPE 1; FLASHKIT_FWD_GATE_FENCE 2 = no gate fence at D 64 / 128) on the installed
# tree. The pair kernel (forced with FLASHKIT_BWD_KS_PAIR=1 onto sanitize_bwd.py's small shapes) under memcheck /
# racecheck / synccheck and its GPU tests; then results_v9.sh's fwd, dims and bwd (D 256 only) steps with the peers.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session43b.sh", timeout_s=600)
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s43b
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck synccheck; do
  FLASHKIT_BWD_KS_PAIR=1 step ${tool}_pair 150 $S --tool $tool --error-exitcode 1 python3 \
    "$TREE/scripts/sanitize_bwd.py" --quick --dims 192 256 --allow-det-order
done
unset PYTORCH_NO_CUDA_MEMORY_CACHING
(cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step tests_pair 200 python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider \
  test_backward_families_gpu.py -k "pair")
pack
STEPS="fwd dims bwd" FWD_TAG=v13 BWD_TAG=bwd-v18-d256 BWD_DIMS=256 bash "$TREE/scripts/dev/results_v9.sh"
pack
