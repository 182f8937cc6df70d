#!/usr/bin/env bash
# Decode tuning sweep (GPU machine): rebuilds the bf16/d128 decode kernels with each
# configuration of FLASHKIT_DECODE_* macros given as arguments and runs
# scripts/decode_quick_bench.py for each, into $OUT/tune-<i>.log.
#   scripts/decode_tune.sh "-DFLASHKIT_DECODE_STAGES_128=3" "-DFLASHKIT_DECODE_STAGES_128=4" ...
set -u
export CPLUS_INCLUDE_PATH=/usr/local/cuda/include/cccl CMAKE_BUILD_PARALLEL_LEVEL=16 PYTHONUNBUFFERED=1
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
i=0
for flags in "$@"; do
  i=$((i + 1))
  echo "=== config $i: $flags" | tee "$OUT/tune-$i.log"
  python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir=build/tune-$i \
    -Ccmake.define.FLASHKIT_HEAD_DIMS=128 -Ccmake.define.FLASHKIT_DTYPES=bf16 \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF \
    "-Ccmake.define.CMAKE_CUDA_FLAGS=$flags" . 2>&1 | tail -3
  python3 scripts/decode_quick_bench.py ${BENCH_ARGS:-} 2>&1 | tee -a "$OUT/tune-$i.log"
done
