#!/usr/bin/env bash
# The device calls owed after 2026-11-27 (fourteenth session), on main. The whole GPU suite no
# longer fits one call's 530 s step on an H100 (H200 at 85b5a3d: 498 s; H100 at 7f9af86: ~2061 of
# ~2066 tests in 530 s, none failed), so it runs as two calls with --durations:
#   S1 (~8 min)  install; the three backward test files (test_backward_gpu.py,
#                test_backward_families_gpu.py with its five sanitize_bwd.py sweeps,
#                test_bwd_det_residency_gpu.py), 500 s
#   S2 (~9 min)  install; every other GPU test file, 500 s (only owed where non-backward kernels
#                changed since 85b5a3d, whose whole suite passed on an H200: none had by 2026-11-27;
#                the bindings' call helper of that day is exercised by S1 too)
# then, from scripts/dev/next_session4.sh: C (step traces of the 128-row D 64 kernel), D (gate-B
# poll A/B) and the rotation part of A (bash scripts/dev/next_session5.sh R), and:
#   T (~3 min)   the deterministic mode's turn-wait trace (FLASHKIT_BWD_DET_TRACE build, prepared
#                2026-11-26 and never run; it compiles with the 128-row D 64 kernel): how much of
#                the issuing warps' time goes to getting and releasing turns, which decides
#                between the waits and the warps' own stalls for the 0.8x deterministic bar.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session5.sh S1")   output suite.tgz
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session5.sh S2")   output suite.tgz
#   run(command="bash scripts/dev/next_session5.sh R")                          output rot.tgz
#   run(command="bash scripts/dev/next_session5.sh T")                          output bwdvar.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
BWD_FILES="test_backward_gpu.py test_backward_families_gpu.py test_bwd_det_residency_gpu.py"
case "${1:-S1}" in
  S1|S2)
    O=${OUT:-/tmp}/suite
    . "$D/device_steps.sh"
    install_cmd "$TREE"
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
    echo "commit ${FLASHKIT_COMMIT:-unknown}" | tee -a "$O/summary.txt"
    step install 400 "${INSTALL[@]}"
    if [ "$1" = S1 ]; then
      sel=$BWD_FILES
    else
      sel="."
      for f in $BWD_FILES; do sel="$sel --ignore=$f"; done
    fi
    # PYTEST_K (optional): a -k expression that narrows the selection
    step "suite_$1" 500 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      --durations=25 $sel ${PYTEST_K:+-k \"$PYTEST_K\"}"
    tar -czf "${OUT:-/tmp}/suite.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  R)
    O=${OUT:-/tmp}/rot
    . "$D/device_steps.sh"
    install_cmd "$TREE"
    step install 400 "${INSTALL[@]}"
    cd /tmp
    for r in 1 2; do
      for m in 0 33 132; do
        step "rot$m-$r" 100 env FLASHKIT_BWD_DET_ROTATE_MAX=$m python3 -m flashkit.bench --sweep fa3 --heads-dims 64 \
          --mode bwd --causal no --impls flashkit_deterministic --out-dir "$O/bench" --tag "rot$m-$r" --no-plot
      done
    done
    tar -czf "${OUT:-/tmp}/rot.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  T) ROUNDS=0 RESIDENCY=0 bash "$D/bwd_det_variants.sh" ;;
  *) echo "usage: $0 S1|S2|R|T" >&2; exit 2 ;;
esac
