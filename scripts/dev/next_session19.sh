#!/usr/bin/env bash
# Device calls of the twenty-fifth session (2026-11-28).
#   H (H100, ~5 min): next_session16.sh Q (wip/decode-q-shift against main: .carry/cur / .carry/old), then
#       on main's MLA kernel (.carry/old = main with v21, installed to /tmp/oldpkg by Q):
#       - the dev harness built here, page 32 with consecutive ids, one box per page against the page-run copies
#         (FLASHKIT_MLA_PAGE_RUNS=32), three interleaved rounds (on the H200 the runs were 1.8-2.0 % faster where
#         compute-bound, 0.2-0.4 % elsewhere; at v17 on an H100 ~2 % slower);
#       - scripts/dev/mla_kernel_times.py: per-kernel device time of whole calls, flashkit against FlashMLA.
#   run(kind="nvidia-h100-x1", carry=[".carry/cur",".carry/old",".carry/flashmla_built"],
#       command="bash scripts/dev/next_session19.sh H")
#   C (~7 min): run(carry=[".carry/flashmla_built"], command="bash scripts/dev/next_session19.sh C")
#   P (~2 min): run(carry=[".carry/flashmla_built"], command="bash scripts/dev/next_session19.sh P")
#   T (~3 min): run(carry=[".carry/mlab2"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session19.sh T")
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-H}" in
  H)
    bash "$D/next_session16.sh" Q
    O=${OUT:-/tmp}/h; . "$D/device_steps.sh"
    device_header
    cd "$TREE"
    step harness 200 nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Iinclude \
      -Isrc -I/usr/local/cuda/include/cccl scripts/dev/mla_sm90_check.cu src/kernels/mla/inst/mla_sm90_bf16.cu \
      src/kernels/mla/inst/mla_sm90_bf16_box64.cu -o /tmp/mla_v21
    B=/tmp/mla_v21
    for r in 1 2 3; do
      for c in "64 1 16384 32" "128 2 8192 32" "32 2 4096 32" "16 1 16384 32" "128 1 8192 32" "128 2 4096 32"; do
        echo "r$r box  $(MLA_SEQ=1 timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/page32.txt"
        echo "r$r runs $(MLA_SEQ=1 FLASHKIT_MLA_PAGE_RUNS=32 timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/page32.txt"
      done
    done
    (cd /tmp && PYTHONPATH=/tmp/oldpkg step ktimes 200 python3 "$TREE/scripts/dev/mla_kernel_times.py" \
      --flashmla-path "$TREE/.carry/flashmla_built" "128 2 16384 fixed" "128 1 16384 varlen" "128 2 4096 fixed" \
      "64 2 8192 fixed" "16 1 16384 fixed" "32 2 4096 fixed")
    tar -czf "${OUT:-/tmp}/h.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  T)
    # Main with page 32 on the run copies by default: install, MLA GPU tests, memcheck, synccheck; then the
    # trace build of the dev harness (.carry/mlab2/mla_trace, FLASHKIT_MLA_TRACE=1, built here) at compute-bound
    # shapes: CTA end spread and per-piece prologue / loop / epilogue, to place the ~45 us per call by which
    # mla_kernel_times.py's linear fit (4k and 16k) puts flashkit's fixed cost above FlashMLA's at h_q 128 s_q 2.
    O=${OUT:-/tmp}/t; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    for c in "128 2 4096" "128 2 16384" "64 2 8192" "128 1 8192" "16 1 16384"; do
      { echo "== trace $c"; timeout 60 "$TREE/.carry/mlab2/mla_trace" perf $c 2>&1 | tail -9; } >> "$O/trace.txt"
      { echo "== main $c"; timeout 60 "$TREE/.carry/mlab2/mla_main" perf $c 2>&1 | tail -1; } >> "$O/trace.txt"
    done
    tar -czf "${OUT:-/tmp}/t.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  P)
    # Per-piece cost, flashkit against FlashMLA: the same total tokens (and so the same pairs of blocks per CTA)
    # cut into B = 128 .. 8 sequences, i.e. ~4.9 .. ~1.2 pieces per CTA at h_q 128 s_q 2 (33 parts); the split
    # kernels' time differences between the rows give each implementation's cost per piece.
    O=${OUT:-/tmp}/p; . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd /tmp && step ktimes 300 python3 "$TREE/scripts/dev/mla_kernel_times.py" --calls 10 \
      --flashmla-path "$TREE/.carry/flashmla_built" "128 2 4096 fixed 128" "128 2 8192 fixed 64" "128 2 16384 fixed 32" \
      "128 2 32768 fixed 16" "128 2 65536 fixed 8" "64 1 16384 fixed 128" "64 1 65536 fixed 32" "64 1 131072 fixed 16")
    tar -czf "${OUT:-/tmp}/p.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  C)
    # SM clock / power of both implementations' calls back to back (mla_clocks.py), then the backward's
    # deterministic-mode trace build (bwd_det_variants.sh with ROUNDS=0: turn waits and releases per shape).
    O=${OUT:-/tmp}/c; . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd /tmp && step clocks 200 python3 "$TREE/scripts/dev/mla_clocks.py" --flashmla-path "$TREE/.carry/flashmla_built" \
      "128 2 16384 fixed" "128 2 4096 fixed" "128 2 65536 fixed 8" "16 1 16384 fixed")
    tar -czf "${OUT:-/tmp}/c.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    RESIDENCY=0 ROUNDS=0 bash "$D/bwd_det_variants.sh"
    ;;
  Q)
    # Q by TMA, prefetched in the previous piece's epilogue (FlashMLA's order), against Q by cp.async at the
    # piece's start (FLASHKIT_MLA_Q_TMA=0, same binary): install + MLA GPU tests + sanitizers on the tree,
    # then the dev harness (.carry/mlabin/mla_qtma) checks and three interleaved rounds.
    O=${OUT:-/tmp}/qt; . "$D/device_steps.sh"
    install_tree "$TREE"
    mla_checks "$TREE"
    B="$TREE/.carry/mlabin/mla_qtma"
    for e in 1 0; do echo "check q_tma=$e: $(FLASHKIT_MLA_Q_TMA=$e timeout 120 $B 2>&1 | tail -1)" >> "$O/ab.txt"; done
    for r in 1 2 3; do
      for c in "128 2 4096" "128 2 16384" "128 1 8192" "64 2 8192" "16 1 16384" "32 2 4096" "64 1 16384" "128 2 4096 16" "16 1 16384 16"; do
        for e in 1 0; do echo "r$r q_tma=$e $(FLASHKIT_MLA_Q_TMA=$e timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/ab.txt"; done
      done
    done
    tar -czf "${OUT:-/tmp}/qt.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  R)
    # NOT RUN YET (the session's device time ran out). The MLA trace build with the prologue's new points
    # (shared memory free, Q landed, prologue barrier; in the epilogue O staged and its copies issued:
    # mla_sm90_check.cu prints them per piece), built here into .carry/mlab4/mla_trace: where the ~4.2 us
    # prologue and the ~3 us epilogue of a piece go (mla.md "Where a call's time goes").
    #   run(carry=[".carry/mlab4"], command="bash scripts/dev/next_session19.sh R")
    for c in "128 2 4096" "128 2 16384" "16 1 16384" "64 2 8192"; do
      echo "== $c"; timeout 60 "$TREE/.carry/mlab4/mla_trace" perf $c 2>&1 | tail -8 | grep -v "trace wg"
    done
    # and the sustained loop of the default build (MLA_SUSTAIN_MS: time, mJ per call, W, MHz under load)
    cd "$TREE" && nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Iinclude -Isrc \
      -I/usr/local/cuda/include/cccl scripts/dev/mla_sm90_check.cu src/kernels/mla/inst/mla_sm90_bf16.cu \
      src/kernels/mla/inst/mla_sm90_bf16_box64.cu -o /tmp/mla_main
    # with the cache maps' L2 promotion at 256 (default) and 128 bytes (FlashMLA's), interleaved twice
    for r in 1 2; do
      for c in "128 2 4096" "128 2 16384" "16 1 16384" "64 2 8192"; do
        for pr in 256 128; do
          echo "r$r promo $pr $(FLASHKIT_MLA_L2_PROMO=$pr MLA_SUSTAIN_MS=1000 timeout 60 /tmp/mla_main perf $c 2>&1 | tail -1)"
        done
      done
    done
    ;;
  O)
    # NOT RUN YET. Branch wip/mla-o-tma (its tree in .carry/cur, its dev harness in .carry/mlab5/mla_otma):
    # a sequence's final output stored by 8 TMA copies from a swizzled staging tile instead of 64 row copies
    # (pages >= 64; FLASHKIT_MLA_O_TMA=0 = the row copies, same binary). Prediction: if the 64 row copies
    # hold the TMA unit (the next piece's K copies queue behind them), -1..-2 % at h_q 128 s_q 2 4k, less at
    # 16k, ~0 where memory-bound; otherwise 0. Then the branch's MLA GPU tests (two new bitwise tests) and
    # sanitizers.
    #   run(carry=[".carry/cur", ".carry/mlab5"], command="bash scripts/dev/next_session19.sh O")
    O=${OUT:-/tmp}/ot; . "$D/device_steps.sh"
    B="$TREE/.carry/mlab5/mla_otma"
    for e in 1 0; do echo "check o_tma=$e: $(FLASHKIT_MLA_O_TMA=$e timeout 120 $B 2>&1 | tail -1)" >> "$O/ab.txt"; done
    for r in 1 2 3; do
      for c in "128 2 4096" "128 2 16384" "128 1 8192" "64 2 8192" "16 1 16384" "32 2 4096"; do
        for e in 1 0; do echo "r$r o_tma=$e $(FLASHKIT_MLA_O_TMA=$e timeout 60 $B perf $c 2>&1 | tail -1)" >> "$O/ab.txt"; done
      done
    done
    install_tree "$TREE/.carry/cur"
    mla_checks "$TREE/.carry/cur"
    tar -czf "${OUT:-/tmp}/ot.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  RO)
    # R then O in one machine session (~5 min): run(carry=[".carry/mlab4", ".carry/mlab5", ".carry/cur"],
    #   command="bash scripts/dev/next_session19.sh RO > $OUT/r.txt 2>&1; tail -60 $OUT/r.txt")
    bash "$0" R
    bash "$0" O
    ;;
  *) echo "usage: $0 H|T|P|C|Q|R|O|RO" >&2; exit 2 ;;
esac
