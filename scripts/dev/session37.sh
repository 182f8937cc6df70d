#!/usr/bin/env bash
# Device calls of the thirty-seventh session (2026-11-29), H200.
#   W: the tree as committed (FLASHKIT_DECODE_WARP_SLICE 1: each warp of the narrow 8-bit kernels copies and consumes
#      only its own 16 keys of a tile, no CTA barrier in the main loop) against a build of the same tree with VDEF
#      (default "FLASHKIT_DECODE_WARP_SLICE 0") prepended to the quantized instantiation files (pip --target
#      /tmp/pkg_$VNAME): graph times first (bf16 / int8 / fp8 of HEAD, int8 / fp8 of the variant, ROUNDS interleaved
#      rounds over v12's rows), then the decode + KV-cache GPU tests of HEAD, the variant's quantized tests, and
#      memcheck / synccheck / racecheck of sanitize_decode.py --quick on HEAD.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session37.sh W")
set -u -o pipefail
PARTS=${1:?usage: session37.sh W}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s37
. "$(dirname "$0")/device_steps.sh"
pack() { tar -czf "${OUT:-/tmp}/s37.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
if [[ $PARTS == *W* ]]; then
  install_tree "$TREE"; pack
  F="$TREE/src/kernels/decode/inst"
  mkdir -p "$O/inst.orig"
  VN=${VNAME:-noslice}
  for f in "$F"/decode_q_*.cu; do cp "$f" "$O/inst.orig/"; with_defines "$f" "${VDEF:-FLASHKIT_DECODE_WARP_SLICE 0}" > "$f.tmp"; mv "$f.tmp" "$f"; done
  install_cmd "$TREE"
  step build_$VN 300 "${INSTALL[@]}" --target /tmp/pkg_$VN
  for f in "$O"/inst.orig/*.cu; do restore_inst "$f" "$F/$(basename "$f")"; done
  pack
  CF=${CF:-"1:65536:32:8 1:16384:32:8 16:8192:32:8 16:16384:32:32 64:8192:32:8 64:16384:32:8 128:4096:32:8 128:8192:32:8 16:8192:64:8 64:16384:64:8"}
  for r in $(seq 1 ${ROUNDS:-2}); do
    (cd /tmp && step bench_head$r 150 python3 "$TREE/scripts/decode_quick_bench.py" --kv ${HKV:-bf16 int8 fp8} --configs $CF \
      --csv "$O/head$r.csv"); pack
    (cd /tmp && step bench_$VN$r 150 env PYTHONPATH=/tmp/pkg_$VN python3 "$TREE/scripts/decode_quick_bench.py" \
      --kv int8 fp8 --configs $CF --csv "$O/$VN$r.csv"); pack
  done
  if [ -z "${SKIP_TESTS:-}" ]; then
    (cd "$TREE/tests/python" && step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py)
    tail -2 "$O/tests.log"; pack
    (cd "$TREE/tests/python" && step tests_$VN 200 env PYTHONPATH=/tmp/pkg_$VN python3 -m pytest -q -n 6 \
      -p no:cacheprovider test_decode_gpu.py -k "quantized")
    pack
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck synccheck racecheck; do
      (cd /tmp && step $tool 100 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick)
      grep -h "Race reported" "$O/$tool.log" | grep -vc nvjet | sed "s/^/$tool hazards outside cuBLAS's nvjet: /" \
        | tee -a "$O/summary.txt"
      pack
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
  fi
fi
pack
