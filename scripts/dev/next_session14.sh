#!/usr/bin/env bash
# Device calls owed after 2026-11-28 (twenty-first session); each names the tree it runs on.
#   O (~5 min)   branch wip/decode-combine-onepass (check it out as the working tree): the combine merges a
#                pair that fits one staging round in one pass (FLASHKIT_DECODE_COMBINE_ONEPASS=1, a define of
#                decode_aux.cu; default 0 = main's code, PTX identical): each output's threads fold their splits
#                online (running max, rescaled sums) after one wait: no LSE phase, no weight pass, two barriers
#                fewer. The 2026-11-28 trace (docs/kernels/decode-logs/trace-h100-2026-11-28/) has 0.6-0.9 us
#                from the LSEs' arrival to their total and 0.9-1.7 us from the O's arrival to the stores in every
#                B 1 call. Prediction: -0.5..-1.0 us per call that runs the combine kernel (B 1 32/8 1k 9.75 ->
#                ~9.0 us, 4k 12.3 -> ~11.5, 16k 25.7 -> ~25.0; FP8 alike), calls without one unchanged.
#                Builds base / onepass / onepass / base (ABBA: the first run of a pair is 1-3% slower on short
#                rows), graph timing; then the onepass build's decode / KV-cache GPU tests, memcheck and racecheck.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session14.sh O")   output o.tgz
#   G (~10 min)  main: every GPU test file but the three backward ones (the first such run since 7cabee4; kernel
#                changes since: the d64 fallback merge, the split cap, the combine's pre-wait reads, each run with
#                its own family's tests on 2026-11-28). The part is next_session11.sh's S:
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session11.sh S")   output s.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-O}" in
  O)
    O=${OUT:-/tmp}/o
    . "$D/device_steps.sh"
    device_header
    if ! grep -q FLASHKIT_DECODE_COMBINE_ONEPASS "$TREE/src/kernels/decode/combine_kernel.cuh"; then
      echo "FAIL this tree has no FLASHKIT_DECODE_COMBINE_ONEPASS (check out wip/decode-combine-onepass)" | tee -a "$O/summary.txt"
      exit 1
    fi
    F="$TREE/src/kernels/decode/inst/decode_aux.cu"
    cp "$F" "$O/aux.orig"
    C="1:1024:32:8 1:4096:32:8 1:16384:32:8 1:65536:32:8 1:4096:64:8 1:16384:32:32 16:4096:32:8 64:8192:32:8"
    i=0
    for v in base onepass onepass base; do
      i=$((i + 1))
      if [ $v = onepass ]; then with_defines "$O/aux.orig" "FLASHKIT_DECODE_COMBINE_ONEPASS 1" > "$F"; else cp "$O/aux.orig" "$F"; fi
      install_cmd "$TREE"
      step "install-$i-$v" 400 "${INSTALL[@]}"
      (cd /tmp && step "bench-$i-$v" 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --sq 1 4 --configs $C)
    done
    with_defines "$O/aux.orig" "FLASHKIT_DECODE_COMBINE_ONEPASS 1" > "$F"
    install_cmd "$TREE"
    step install-check 400 "${INSTALL[@]}"
    (cd "$TREE/tests/python" && step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py test_index_hardening_gpu.py)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    step memcheck 100 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
    step racecheck 100 $S --tool racecheck --print-limit 20 python3 "$TREE/scripts/sanitize_decode.py" --quick
    grep "Race reported" "$O/racecheck.log" | grep -v nvjet | head -5 >> "$O/summary.txt"
    restore_inst "$O/aux.orig" "$F"
    tar -czf "${OUT:-/tmp}/o.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 O" >&2; exit 2 ;;
esac
