#!/usr/bin/env bash
# Device calls of the twenty-sixth session (2026-11-28).
#   W (~5 min): main with the O TMA store (v23): install, MLA GPU tests, memcheck, synccheck, the whole
#       MLA matrix with FlashMLA (default L2 promotion of the cache maps, 256 B); then the page-64 part
#       of the matrix again with FLASHKIT_MLA_L2_PROMO=128 and once more with 256 (same process order
#       as the first, to see run-to-run drift): the dev harness had h_q 16 s_q 1 16k 3 % faster at 128
#       (0.559 / 0.560 against 0.577 / 0.578 ms), 128 2 4k 0.8 % slower, the rest within noise.
#   run(carry=[".carry/flashmla_built"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session20.sh W")
#   K (~4 min): branch wip/mla-k0-prefetch (the working tree): the dev harness built here (.carry/mlab6/mla_pref)
#       checks and three interleaved rounds with FLASHKIT_MLA_K0_PREFETCH 1 / 0 (same binary); the trace build
#       (.carry/mlab6/mla_trace) at two shapes both ways; then install, MLA GPU tests, memcheck, synccheck.
#       Prediction: -0.5..-1.5 % at 4k where compute-bound (3-4 direct pieces per CTA, ~1.5 us each of the
#       first block's latency taken off the next prologue), ~0 at 16k and where memory-bound.
#   run(carry=[".carry/mlab6"], command="bash scripts/dev/next_session20.sh K > $OUT/k.txt 2>&1; tail -40 $OUT/k.txt")
#   (run 2026-11-28: prefetch by thread 0 neutral, -0.6 us prologue / +0.9 us epilogue per piece in the trace.)
#   K again with SUITE=1 (v2: thread 128 prefetches, with volatile early loads of the length and both first
#   page ids; the second id handed over in shared memory), then the GPU suite but MLA (run above) and backward.
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-W}" in
  W)
    O=${OUT:-/tmp}/w; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    (cd /tmp && step matrix 300 python3 -m flashkit.bench --op mla --flashmla-path "$TREE/.carry/flashmla_built" \
      --out-dir "$O/matrix")
    for pr in 128 256; do
      (cd /tmp && FLASHKIT_MLA_L2_PROMO=$pr step matrix_p$pr 200 python3 -m flashkit.bench --op mla \
        --flashmla-path "$TREE/.carry/flashmla_built" --page-sizes 64 --out-dir "$O/promo$pr")
    done
    tar -czf "${OUT:-/tmp}/w.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  K)
    O=${OUT:-/tmp}/k; . "$D/device_steps.sh"
    device_header
    B="$TREE/.carry/mlab6/mla_pref"
    for e in 1 0; do echo "check pref=$e: $(FLASHKIT_MLA_K0_PREFETCH=$e timeout 120 $B 2>&1 | tail -1)" >> "$O/ab.txt"; done
    for r in 1 2 3; do
      for c in "128 2 4096" "128 1 4096" "64 2 4096" "128 2 16384" "64 2 8192" "128 1 8192" "16 1 16384" "32 2 4096"; do
        for e in 1 0; do echo "r$r pref=$e $(FLASHKIT_MLA_K0_PREFETCH=$e timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/ab.txt"; done
      done
    done
    for c in "128 2 4096" "64 2 4096"; do
      for e in 1 0; do
        { echo "== trace pref=$e $c"; FLASHKIT_MLA_K0_PREFETCH=$e timeout 60 "$TREE/.carry/mlab6/mla_trace" perf $c 2>&1 | tail -8 | grep -v "trace wg"; } >> "$O/trace.txt"
      done
    done
    install_tree "$TREE"
    mla_checks "$TREE"
    # K2 (SUITE=1): then every GPU test file but the MLA ones (just run) and the three backward ones
    if [ "${SUITE:-0}" = 1 ]; then
      sel="."
      for f in test_mla_gpu.py test_mla_fp8_gpu.py test_backward_gpu.py test_backward_families_gpu.py \
        test_bwd_det_residency_gpu.py; do sel="$sel --ignore=$f"; done
      step suite 400 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
        --durations=15 $sel"
    fi
    tar -czf "${OUT:-/tmp}/k.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    cat "$O/ab.txt" "$O/summary.txt"
    ;;
  E)
    # (Run 2026-11-28 with branch wip/mla-k0-prefetch checked out: neither switch exists on main.) Q early (FLASHKIT_MLA_Q_EARLY) x K0 prefetch (FLASHKIT_MLA_K0_PREFETCH), same binary, two interleaved
    # rounds; the trace at 128 2 4k with both on / both off; then install, MLA GPU tests, sanitizers.
    #   run(carry=[".carry/mlab6"], command="bash scripts/dev/next_session20.sh E > $OUT/e.txt 2>&1; tail -30 $OUT/e.txt")
    O=${OUT:-/tmp}/e; . "$D/device_steps.sh"
    device_header
    B="$TREE/.carry/mlab6/mla_pref"
    for qe in 1 0; do for kp in 1 0; do
      echo "check qe=$qe kp=$kp: $(FLASHKIT_MLA_Q_EARLY=$qe FLASHKIT_MLA_K0_PREFETCH=$kp timeout 120 $B 2>&1 | tail -1)" >> "$O/ab.txt"
    done; done
    for r in 1 2; do
      for c in "128 2 4096" "128 1 4096" "64 2 4096" "128 2 16384" "128 1 8192" "16 1 16384" "32 2 4096"; do
        for qe in 1 0; do for kp in 1 0; do
          echo "r$r qe=$qe kp=$kp $(FLASHKIT_MLA_Q_EARLY=$qe FLASHKIT_MLA_K0_PREFETCH=$kp timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/ab.txt"
        done; done
      done
    done
    for e in 1 0; do
      { echo "== trace qe=kp=$e 128 2 4096"; FLASHKIT_MLA_Q_EARLY=$e FLASHKIT_MLA_K0_PREFETCH=$e timeout 60 \
        "$TREE/.carry/mlab6/mla_trace" perf 128 2 4096 2>&1 | tail -8 | grep -v "trace wg" | cut -c1-1200; } >> "$O/trace.txt"
    done
    install_tree "$TREE"
    mla_checks "$TREE"
    tar -czf "${OUT:-/tmp}/e.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    cat "$O/summary.txt"
    ;;
  V)
    # main at the end of the session: install, MLA GPU tests, memcheck, synccheck.
    #   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session20.sh V > $OUT/v.txt 2>&1; tail $OUT/v.txt")
    O=${OUT:-/tmp}/v; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    tar -czf "${OUT:-/tmp}/v.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    cat "$O/summary.txt"; tail -1 "$O/mla_tests.log"
    ;;
  *) echo "usage: $0 W|K|E|V" >&2; exit 2 ;;
esac
