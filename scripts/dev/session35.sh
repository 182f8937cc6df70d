#!/usr/bin/env bash
# Device call of the thirty-fifth session (2026-11-28), H200.
#   V: main with FLASHKIT_DECODE_IGNORE_SRC at 1 (its new default): the decode and KV-cache GPU tests,
#      memcheck / racecheck / synccheck of sanitize_decode.py --quick, then the quantized table
#      (decode-quant v10: the 8 rows of v9, two rounds, the faster of each) for bench/results.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session35.sh V")
#   C: SM clock, power and cycles per call of bf16 against the 8-bit caches back to back (decode_clocks.py): is the
#      8-bit kernels' H200 gap cycles or energy (power cap)?
set -u -o pipefail
PART=${1:?usage: session35.sh V|C|F|B|N}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s35-$PART
. "$(dirname "$0")/device_steps.sh"
case $PART in
  V)
    install_tree "$TREE"
    (cd "$TREE/tests/python" && step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py)
    tail -2 "$O/tests.log"
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck synccheck; do
      (cd /tmp && step $tool 200 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick)
      grep -h "Race reported" "$O/$tool.log" | grep -vc nvjet | sed "s/^/$tool hazards outside cuBLAS's nvjet: /" \
        | tee -a "$O/summary.txt"
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    for r in 1 2; do
      (cd /tmp && step quant$r 150 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs \
        1:65536:32:8 1:16384:32:8 16:8192:32:8 16:16384:32:32 64:8192:32:8 64:16384:32:8 128:4096:32:8 \
        128:8192:32:8 --csv "$O/quant$r.csv")
    done
    ;;
  C)
    install_tree "$TREE"
    (cd /tmp && step clocks 300 python3 "$TREE/scripts/dev/decode_clocks.py" --seconds 2 64:16384:32:8 16:8192:32:8 \
      128:8192:32:8 1:65536:32:8)
    cat "$O/clocks.log"
    ;;
  F)
    install_tree "$TREE"
    (cd /tmp && step fclocks 200 python3 "$TREE/scripts/dev/fwd_clocks.py" --seconds 2 128:16384:0 128:1024:0 \
      256:16384:0 64:16384:1)
    cat "$O/fclocks.log"
    ;;
  B)
    install_tree "$TREE"
    (cd /tmp && step bclocks 200 python3 "$TREE/scripts/dev/fwd_clocks.py" --bwd --seconds 2 128:16384:0 128:2048:1 \
      64:16384:0)
    cat "$O/bclocks.log"
    ;;
  N)
    # The narrow form of the 8-bit kernels (decode.md "The narrow form"; default on, FLASHKIT_DECODE_NARROW=0 off):
    # GPU tests, then graph times narrow / 16-row in one build (the switch is read at run time), then sanitizers.
    # Packs $O after every step (the call may be cut by the session's device budget).
    pack() { tar -czf "${OUT:-/tmp}/s35-N.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
    install_tree "$TREE"; pack
    (cd "$TREE/tests/python" && step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py)
    tail -2 "$O/tests.log"; pack
    CF="16:8192:32:8 64:8192:32:8 128:4096:32:8 1:65536:32:8 16:16384:32:32 16:8192:64:8 64:16384:32:8"
    (cd /tmp && step bench_narrow1 100 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF \
      --csv "$O/narrow1.csv"); pack
    (cd /tmp && step bench_wide1 100 env FLASHKIT_DECODE_NARROW=0 python3 "$TREE/scripts/decode_quick_bench.py" \
      --kv int8 fp8 --configs $CF --csv "$O/wide1.csv"); pack
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck synccheck; do
      (cd /tmp && step $tool 100 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick)
      pack
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    (cd /tmp && step bench_narrow2 100 python3 "$TREE/scripts/decode_quick_bench.py" --kv int8 fp8 --configs $CF \
      --csv "$O/narrow2.csv"); pack
    (cd /tmp && step bench_wide2 100 env FLASHKIT_DECODE_NARROW=0 python3 "$TREE/scripts/decode_quick_bench.py" \
      --kv int8 fp8 --configs $CF --csv "$O/wide2.csv"); pack
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    (cd /tmp && step racecheck 100 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" \
      --quick)
    grep -h "Race reported" "$O/racecheck.log" | grep -vc nvjet | sed "s/^/racecheck hazards outside cuBLAS's nvjet: /" \
      | tee -a "$O/summary.txt"
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    ;;
  *) echo "usage: $0 V|C|F|B|N" >&2; exit 2 ;;
esac
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/s35-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
