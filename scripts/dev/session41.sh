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
pack() { tar -czf "${OUT:-/tmp}/s41.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
if [[ $PARTS == *A* ]]; then
  install_tree "$TREE"; pack
  F="$TREE/tests/python/test_backward_families_gpu.py"
  # passed in session 40 (H200, 4abba2f): dispatch, sm90_v1, the four padded_head_dims paths, d256_split_sdp,
  # d256_deterministic_tma_adds (and the pair / chunked / pp_tma ones in session 39); the rest:
  K=${FAMILIES_K:-"portable or gqa_split or pp_tma or pair_kernel or m128 or chunked"}
  (cd /tmp && python3 -m pytest -q -m gpu -p no:cacheprovider --collect-only "$F" -k "$K" 2>/dev/null | grep "::" \
    > "$O/ids.txt")
  echo "$(wc -l < "$O/ids.txt") tests selected" | tee -a "$O/summary.txt"
  mkdir -p "$O/each"
  one() {
    local id=$1 n t0=$SECONDS rc r; n=$(echo "${id##*/}" | tr -c 'A-Za-z0-9_.-' '_')
    (cd /tmp && timeout "${TEST_LIMIT:-400}" python3 -m pytest -q -rP -m gpu -p no:cacheprovider "$id" \
      > "$O/each/$n.log" 2>&1)
    rc=$?
    case $rc in 0) r=PASS;; 124) r=TIMEOUT;; *) r=FAIL;; esac
    echo "$r $((SECONDS - t0))s ${id##*/} $(grep -h 'cases passed' "$O/each/$n.log" | tail -1)" >> "$O/summary.txt"
  }
  export -f one; export O
  sed "s#^#$TREE/tests/python/#" "$O/ids.txt" | xargs -P "${TESTS_P:-3}" -I{} bash -c 'one "$@"' _ {}
  pack
  (cd /tmp && step fwd_bwd_bench_timing 200 python3 "$TREE/scripts/dev/fwd_clocks.py" --fwd-bwd --bench-timing \
    128:16384:0 128:8192:0)
  cat "$O/fwd_bwd_bench_timing.log" >> "$O/summary.txt"; pack
fi
