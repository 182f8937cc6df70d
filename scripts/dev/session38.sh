#!/usr/bin/env bash
# Device calls of the thirty-eighth session (2026-11-29), H200.
#   R: the bf16 D 128 decode kernel at one CTA per SM with a deeper ring (decode.md "What is left at B 16": the lead
#      never measured since v2). The tree as committed against builds with VARIANTS (NAME=DEFS, DEFS prepended to
#      decode_bf16_hd128.cu; pip --target /tmp/pkg_NAME), graph times of ROUNDS interleaved rounds over CF (head's
#      first round with SDPA cuDNN on a contiguous copy).
#   N: the narrow MLA kernel (branch wip/mla-narrow or wip/mla-narrow-alternate: run on that tree): the MLA GPU tests, memcheck of sanitize_mla.py,
#      synccheck / racecheck of its --quick set, then the bench's MLA rows of <= 32 query rows (flashkit only) with
#      FLASHKIT_MLA_NARROW=1 and =0 (the seesaw kernel), ROUNDS interleaved rounds (MLA_ARGS overrides the rows).
#   P: the MLA cache map's L2 promotion at 17-32 query rows per KV head, page 64 (128 bytes: FLASHKIT_MLA_L2_PROMO=128,
#      against the rule's 256), ROUNDS interleaved rounds of the bench's rows; then memcheck of sanitize_mla.py and
#      synccheck of its --quick set on this tree.
#   F: the tree's MLA GPU tests, FlashMLA built from .carry/flashmla (bench/peers/flashmla/build.sh sources), then the
#      bench's MLA rows at h_q 16 / 32 (MLA_ARGS overrides) for flashkit and flashmla in one process.
#      run(carry=[".carry/flashmla"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session38.sh F")
#   S: B 16 8k, GQA 64/8 and 32/8, bf16 and FP8: graph times and per-kernel profile of the balanced plan against fixed
#      split sizes 1024 / 2048 / 4096 (issue 10's one B 16 row under its bar, FP8 64/8).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session38.sh R")
set -u -o pipefail
PARTS=${1:?usage: session38.sh R}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s38
. "$(dirname "$0")/device_steps.sh"
pack() { tar -czf "${OUT:-/tmp}/s38.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
if [[ $PARTS == *R* ]]; then
  install_tree "$TREE"; pack
  F="$TREE/src/kernels/decode/inst/decode_bf16_hd128.cu"
  inst_variants "$F" "${VARIANTS:-"s5=FLASHKIT_DECODE_STAGES_128 5|bn128s3=FLASHKIT_DECODE_BLOCKN 128;FLASHKIT_DECODE_STAGES_128 3|bn128s2=FLASHKIT_DECODE_BLOCKN 128;FLASHKIT_DECODE_STAGES_128 2"}"
  CF=${CF:-"16:8192:32:8 16:4096:32:8 16:8192:64:8 16:16384:32:32 64:8192:32:8 128:4096:32:8 1:65536:32:8 1:16384:32:8"}
  for r in $(seq 1 ${ROUNDS:-2}); do
    extra=""; [ "$r" = 1 ] && extra="--cudnn"
    (cd /tmp && step bench_head$r 150 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 --configs $CF $extra \
      --csv "$O/head$r.csv"); pack
    for name in "${VARIANT_NAMES[@]}"; do
      (cd /tmp && step bench_$name$r 150 env PYTHONPATH=/tmp/pkg_$name python3 "$TREE/scripts/decode_quick_bench.py" \
        --kv bf16 --configs $CF --csv "$O/$name$r.csv"); pack
    done
  done
fi
if [[ $PARTS == *N* ]]; then
  install_tree "$TREE"; pack
  if [ -z "${SKIP_TESTS:-}" ]; then
    (cd /tmp && step mla_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider "$TREE/tests/python/test_mla_gpu.py" \
      "$TREE/tests/python/test_mla_fp8_gpu.py")
    tail -3 "$O/mla_tests.log" | tee -a "$O/summary.txt"; pack
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    (cd /tmp && step memcheck 240 $S --tool memcheck --error-exitcode 1 --print-limit 50 python3 "$TREE/scripts/sanitize_mla.py")
    for tool in synccheck racecheck; do
      (cd /tmp && step $tool 200 $S --tool $tool --error-exitcode 1 --print-limit 50 python3 "$TREE/scripts/sanitize_mla.py" --quick \
        ${SAN_ONLY:+--only "$SAN_ONLY"})
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    pack
  fi
  mla_env_ab FLASHKIT_MLA_NARROW narrow "1 0" \
    "${MLA_ARGS:-"--heads 16 32 --sq 1 2 --seqlens 4096 16384 --modes fixed --page-sizes 64"}"
fi
if [[ $PARTS == *P* ]]; then
  [[ $PARTS == *N* ]] || install_tree "$TREE"
  mla_env_ab FLASHKIT_MLA_L2_PROMO promo "256 128" \
    "${MLA_ARGS:-"--heads 16 32 --sq 1 2 --seqlens 4096 16384 --modes fixed varlen --page-sizes 64"}"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  (cd /tmp && step memcheck_mla 240 $S --tool memcheck --error-exitcode 1 --print-limit 50 python3 "$TREE/scripts/sanitize_mla.py")
  (cd /tmp && step synccheck_mla 200 $S --tool synccheck --error-exitcode 1 --print-limit 50 python3 "$TREE/scripts/sanitize_mla.py" --quick)
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  tail -3 "$O/memcheck_mla.log" | tee -a "$O/summary.txt"
fi
if [[ $PARTS == *F* ]]; then
  install_tree "$TREE"; pack
  (cd /tmp && step mla_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider "$TREE/tests/python/test_mla_gpu.py" \
    "$TREE/tests/python/test_mla_fp8_gpu.py")
  tail -1 "$O/mla_tests.log" | tee -a "$O/summary.txt"; pack
  MAX_JOBS=12 NVCC_THREADS=4 step flashmla_build 300 bash "$TREE/bench/peers/flashmla/build.sh" compile "$TREE/.carry/flashmla"
  mkdir -p /tmp/fmb && bash "$TREE/bench/peers/flashmla/build.sh" pack "$TREE/.carry/flashmla" /tmp/fmb/flashmla_built > /dev/null
  export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
  MA=${MLA_ARGS:-"--heads 16 32 --sq 1 2 --modes fixed varlen --page-sizes 64"}
  (cd /tmp && step mla_bench 400 python3 -m flashkit.bench --op mla --impls flashkit flashmla --flashmla-path /tmp/fmb/flashmla_built \
    $MA --out-dir "$O/mla_bench")
  grep -i "speed-up\|geomean\|flashmla " "$O/mla_bench.log" | tail -40 > "$O/mla_bench_tail.txt"
fi
if [[ $PARTS == *S* ]]; then
  install_tree "$TREE"; pack
  (cd /tmp && step split_probe 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --configs 16:8192:64:8 16:8192:32:8 \
    --split-size 0 1024 2048 4096 --profile)
  cat "$O/split_probe.log"
fi
pack
