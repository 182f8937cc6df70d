#!/usr/bin/env bash
# The device calls owed after 2026-11-27 (seventeenth session), in this order:
#   G4 (~5 min)  the GQA 4 table entry (deterministic D 128, h_ratio a multiple of 4, S_k >= 2048,
#                clusters of 2; docs/kernels/bwd.md "GQA 4"; applied at eb5305b, run the eighteenth session,
#                bwd-logs/gqa4-split-check-h100-2026-11-27/):
#                run(command="bash scripts/dev/next_session9.sh G4"): the split tests (the patch adds a
#                GQA 4 shape to test_gqa_split_grads), the families' split test (=8 and =0 subprocesses),
#                memcheck / racecheck of the quick set, and the GQA 4 causal sweep never / default (two
#                rounds). Keep the entry if the tests pass and the deterministic D 128 rows gain as in
#                docs/kernels/bwd-logs/gqa4-split-h100-2026-11-27/.
#   S  (~9 min)  the rest of the whole GPU suite at the session's commit (the seventeenth's run stopped at
#                98% at the call's 500 s limit): bash scripts/dev/next_session5.sh S1 (backward files, without
#                the v1 / portable sweeps via PYTEST_K) and S2 (everything else) in two calls.
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-G4}" in
  G4)
    O=${OUT:-/tmp}/g4
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd "$TREE/tests/python" && step tests 330 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_backward_gpu.py test_backward_families_gpu.py -k "gqa_split")
    cd /tmp
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck; do
      step "$tool" 150 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    B=(python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --mode bwd --gqa 4 --causal yes --out-dir "$O/bench"
       --no-plot --impls flashkit flashkit_deterministic)
    for r in 1 2; do
      peers=(); [ "$r" = 1 ] && peers=(sdpa_cudnn)
      step "s0_$r" 100 env FLASHKIT_BWD_GQA_SPLIT=0 "${B[@]}" "${peers[@]}" --tag "s0$r"
      step "t_$r" 100 "${B[@]}" --tag "t$r"
    done
    tar -czf "${OUT:-/tmp}/g4.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 G4 (S: see the header)" >&2; exit 2 ;;
esac
