#!/usr/bin/env bash
# Device run: the D 256 pair kernel's dS hand-off by per-thread st.async instead of thread 0's
# bulk copy (FLASHKIT_BWD_KS_PAIR_STASYNC, kernel_ks_pair.cuh). The cluster probe timed an 8 KB
# hand-off at 1711 cycles by st.async against 2080 by the bulk copy; prediction +0..3% on the rows
# that run the pair kernel (S_k >= 4k, or >= 1k unmasked). Define A/B (two interleaved rounds, FA3
# sweep D 256, bwd fast), then with st.async built: sanitize_bwd.py --dims 256 and the pair tests
# with FLASHKIT_BWD_KS_PAIR=1 (pairs at every length), memcheck / racecheck / synccheck. ~5 min.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/pair_stasync_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/stasync
. "$(dirname "$0")/device_steps.sh"
OUT=$O INSTS="bwd_sm90_bf16_hd256" DIMS="256" ROUNDS=2 \
  bash "$TREE/scripts/dev/bwd_define_ab.sh" s0= s1='FLASHKIT_BWD_KS_PAIR_STASYNC 1' > "$O/ab.log" 2>&1
# The A/B restored the files but left s1 installed: check that build (bf16; fp16 is as committed).
cd /tmp
export FLASHKIT_BWD_KS_PAIR=1
step sanitize 200 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256 --dtypes bfloat16
step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider \
  test_backward_families_gpu.py -k pair"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck synccheck; do
  step $tool 250 $S --tool $tool --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
    --quick --dims 256 --dtypes bfloat16
done
tar -czf "${OUT:-/tmp}/stasync.tgz" -C "$(dirname "$O")" "$(basename "$O")"
