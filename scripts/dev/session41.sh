#!/usr/bin/env bash
# Device call prepared in the fortieth session (2026-11-29) for the next one, H200 or H100.
#   A: (1) the backward families file's tests that session 40 did not get to (each in its own pytest, TEST_LIMIT
#      seconds each, TESTS_P at once, -rP so the sanitize_bwd summary lines with their timings show; the full file
#      has not passed as a whole since the fixed-point dQ became the default); (2) fwd_clocks.py --fwd-bwd
#      --bench-timing at D 128 16k / 8k non-causal (the bench's fwd_bwd row against the sustained rate, bwd.md's open
#      fwd_bwd item). ~8-10 min.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session41.sh A", timeout_s=600)
set -u -o pipefail
PARTS=${1:?usage: session41.sh A}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s41
. "$(dirname "$0")/device_steps.sh"
if [[ $PARTS == *A* ]]; then
  install_tree "$TREE"; pack
  # a watchdog: pack whatever is there before the device call's 600 s run out (the tests may not all finish)
  (sleep "${PACK_AT:-545}"; echo "watchdog pack at ${PACK_AT:-545}s" >> "$O/summary.txt"; pack) &
  (cd /tmp && step fwd_bwd_bench_timing 200 python3 "$TREE/scripts/dev/fwd_clocks.py" --fwd-bwd --bench-timing \
    128:16384:0 128:8192:0)
  cat "$O/fwd_bwd_bench_timing.log" >> "$O/summary.txt"; pack
  # passed in session 40 (H200, 4abba2f): dispatch, sm90_v1, the four padded_head_dims paths, d256_split_sdp,
  # d256_deterministic_tma_adds (and the pair / chunked / pp_tma ones in session 39); the rest:
  tests_each "$TREE/tests/python/test_backward_families_gpu.py" \
    "${FAMILIES_K:-"portable or gqa_split or pp_tma or pair_kernel or m128 or chunked"}"
  pack
fi
