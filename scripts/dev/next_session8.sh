#!/usr/bin/env bash
# Device calls of the seventeenth session (2026-11-27) after the GQA split's default table
# (src/launch/bwd_gqa_split.h) and FLASHKIT_BWD_LSE_FILL_INF=1 became the defaults:
#   V1 (~7 min)  install; the backward test files without the unchanged v1 / portable float64 sweeps;
#                compute-sanitizer memcheck / racecheck of sanitize_bwd.py --quick --dims 64 128 (defaults)
#   V2 (~6 min)  the GQA 8 bwd sweep D 64 / 128 with the arms never (=0) and the default table (t),
#                two interleaved rounds, cuDNN in the first
#   R  (~6 min)  results bwd-v14: MHA D 64 / 128 / 256 bwd + fwd_bwd with cuDNN, FA2 and the deterministic mode
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session8.sh V1")   output v1.tgz / v2.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
case "${1:-V1}" in
  V1)
    O=${OUT:-/tmp}/v1
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd "$TREE/tests/python" && step tests 330 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider --durations=10 \
      test_backward_gpu.py test_backward_families_gpu.py test_bwd_det_residency_gpu.py \
      -k "not test_sm90_v1_backward_matches_reference and not test_portable_backward_matches_reference")
    cd /tmp
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck; do
      step "$tool" 150 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128
    done
    tar -czf "${OUT:-/tmp}/v1.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  V2)
    O=${OUT:-/tmp}/v2
    . "$D/device_steps.sh"
    install_tree "$TREE"
    cd /tmp
    B=(python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --gqa 8 --out-dir "$O/gqa" --no-plot)
    I=(--impls flashkit flashkit_deterministic)
    for r in 1 2; do
      peers=(); [ "$r" = 1 ] && peers=(sdpa_cudnn)
      step "s0_$r" 200 env FLASHKIT_BWD_GQA_SPLIT=0 "${B[@]}" "${I[@]}" "${peers[@]}" --tag "s0$r"
      step "t_$r" 200 "${B[@]}" "${I[@]}" --tag "t$r"
    done
    tar -czf "${OUT:-/tmp}/v2.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  R) STEPS="install bwd" BWD_TAG=bwd-v14 exec bash "$D/results_v9.sh" ;;
  H)  # the eager autograd Function path: its tests, the host probe, fwd_bwd rows with cuDNN
    O=${OUT:-/tmp}/h
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd "$TREE/tests/python" && step cpu_tests 200 python3 -m pytest -q -p no:cacheprovider test_torch_ops_cpu.py)
    (cd "$TREE/tests/python" && step gpu_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_backward_gpu.py test_attention_gpu.py -k "autograd or deterministic_flag or public or compile or graph")
    cd /tmp
    for s in 32,512,16,128 32,512,32,64; do
      step "probe_$s" 120 python3 "$TREE/scripts/dev/host_probe.py" --out "$O" --shape $s
    done
    rm -f "$O"/trace_*.json
    step fwd_bwd 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --mode fwd_bwd \
      --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag fb --no-plot
    tar -czf "${OUT:-/tmp}/h.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  P)  # host pieces probe, then results bwd-v15 (bwd and fwd_bwd after the autograd Function path)
    O=${OUT:-/tmp}/res9
    mkdir -p "$O"
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd /tmp && step pieces 120 python3 "$TREE/scripts/dev/host_pieces_probe.py" --out "$O")
    STEPS="bwd" BWD_TAG=bwd-v15 exec bash "$D/results_v9.sh" ;;
  *) echo "usage: $0 V1|V2|R|H|P" >&2; exit 2 ;;
esac
