#!/usr/bin/env bash
# On the GPU machine, from the repo root, with .carry/flashmla (sources, see build.sh) and
# .carry/mla-bench (this branch's python/flashkit + this folder) carried:
#   1. build FlashMLA (sm_90a) in .carry/flashmla, pack the extension + package into
#      $OUT/flashmla_built.tar (-> .carry/flashmla_built on the development machine);
#   2. import it from the packed copy alone, run a subset of FlashMLA's own test;
#   3. run the MLA sweep (flashkit rows skipped while flashkit.mla does not import).
# Skip step 1 with FM_PREBUILT=<absolute dir> (a flashmla_built folder carried instead; its
# tests/ holds FlashMLA's test file). BENCH_ARGS: more sweep options; DOBENCH= skips the
# do_bench comparison pass.
set -u
R=$PWD
export CPLUS_INCLUDE_PATH=/usr/local/cuda/include/cccl MAX_JOBS=${MAX_JOBS:-4} NVCC_THREADS=${NVCC_THREADS:-4} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import matplotlib; print('matplotlib', matplotlib.__version__)" || echo "no matplotlib"
FM=${FM_PREBUILT:-/tmp/fm/flashmla_built}
if [ -z "${FM_PREBUILT:-}" ]; then
  cd .carry/flashmla
  /usr/bin/time -f 'build wall %e s' python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 \
    || { tail -60 $OUT/build.log; exit 1; }
  tail -2 $OUT/build.log
  mkdir -p $FM/tests && cp -r flash_mla flash_mla_cuda*.so $FM/ && rm -rf $FM/flash_mla/__pycache__
  cp tests/test_flash_mla.py $FM/tests/ && cp LICENSE $FM/LICENSE.FlashMLA
  tar -C $(dirname $FM) -cf $OUT/flashmla_built.tar flashmla_built && ls -la $FM $OUT
  cd $R
fi
( cd /tmp && PYTHONPATH=$FM python3 -c "import flash_mla, flash_mla_cuda; print('import ok:', flash_mla.__file__, flash_mla_cuda.__file__)" ) || exit 1
( cd /tmp && PYTHONPATH=$FM:$FM/tests timeout 120 python3 $R/.carry/mla-bench/peers/flashmla/test_subset.py ${FM_TEST_ARGS:-} ) 2>&1 | tee -a $OUT/run.log
export PYTHONPATH=$R/.carry/mla-bench/python FLASHKIT_COMMIT=$(cat $R/.carry/mla-bench/COMMIT)
python3 -m flashkit.bench --op mla --flashmla-path $FM --out-dir $OUT ${BENCH_ARGS:-} 2>&1 | tee -a $OUT/run.log
if [ -n "${DOBENCH-1}" ]; then
  python3 -m flashkit.bench --op mla --quick --impls flashmla --timer do_bench --no-plot \
    --tag dobench --flashmla-path $FM --out-dir /tmp/dobench 2>&1 | tee -a $OUT/run.log
fi
