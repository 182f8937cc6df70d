#!/usr/bin/env bash
# First GPU run of branch wip/next-2 (main + wip/fwd-uniform-desc + wip/decode-split-cap +
# flashkit.testing.paged_pool in the MLA tests +
# the persistent forward's walk over pairs of row blocks; compiled but never run), against
# main, in two device calls while the machine is warm:
#
#   for r in main wip/next-2; do d=.carry/$(basename $r); rm -rf $d; mkdir -p $d; git archive $r | tar -x -C $d; done
#   run(carry=[".carry/main", ".carry/next-2"], command="bash .carry/next-2/scripts/dev/validate_next2.sh A")
#   run(same carry, command="bash .carry/next-2/scripts/dev/validate_next2.sh B")
#
# A (~5 min): install wip/next-2; the forward bitwise probe (TMA, cp.async and persistent
#   kernels agree), the forward tests, memcheck/racecheck of the small forward cases, the
#   MLA tests and sanitizer, the decode tests; then the timings of wip/next-2 (forward FA3
#   sweep at D 64/128 with cuDNN, MLA matrix quick, decode quick bench incl. B = 1).
# B (~3 min): install main; the same timings (the A/B baseline of the same machine).
# Expected (written before the run): forward D64 +2-5% (its spills gone), D128 +1-3% (20
# fewer instructions per tile and warp); MLA +2-5% (R2UR 165 -> 18); decode B = 1 FP8 16k
# -10% time, 64k -4%, B >= 16 unchanged (the split cap only bites at <= 2 sequences);
# persistent kernel forced on (fwd_bench_persist): causal 16k from -7% (D128) / -13% (D256)
# against the non-persistent grid (main's snake walk) to within +-2% (pairs: 1.03x the
# ideal makespan instead of 1.19x), causal 1k/512 +2-4% over main's persistent numbers.
set -u -o pipefail
PART=${1:?usage: validate_next2.sh A|B}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
TREE=$([ "$PART" = A ] && echo "$HERE" || echo "$(dirname "$HERE")/main")
O=${OUT:-/tmp}/next2-$PART
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install 240 python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$TREE/build/gpu" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF "$TREE"
cd /tmp
PY="$TREE/tests/python"
if [ "$PART" = A ]; then
  step fwd_bitwise 150 bash -c "cd $PY && python3 -m pytest -q -m gpu -p no:cacheprovider test_kernel_families_gpu.py -k tma_loads"
  step fwd_tests 200 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_index_hardening_gpu.py"
  step fwd_memcheck 100 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py"
  step fwd_racecheck 100 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
  step mla_tests 200 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_mla_gpu.py test_mla_fp8_gpu.py -k 'not sweep_shape'"
  step mla_memcheck 120 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_mla.py" --quick
  step decode_tests 200 bash -c "cd $PY && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py"
fi
step fwd_bench 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag "$PART"
step fwd_bench_persist 150 env FLASHKIT_FWD_PERSISTENT=1 python3 -m flashkit.bench --sweep fa3 --causal yes \
  --heads-dims 128 256 --impls flashkit --out-dir "$O/bench" --tag "persist-$PART"
step mla_bench 150 python3 -m flashkit.bench --op mla --quick --impls flashkit --out-dir "$O/bench"
step decode_bench 90 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 \
  --configs 1:65536:32:8 1:16384:32:8 1:8192:32:8 16:8192:32:8 64:8192:32:8 --csv "$O/decode.csv"
tar -czf "${OUT:-/tmp}/next2-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
