#!/usr/bin/env bash
# Device run: the D 64 ping-pong backward's dQ writer alternating between the warpgroups by row
# block parity (FLASHKIT_BWD_D64_DQ_ALT, pp_traits.cuh; fast mode only). The step trace: warpgroup
# 1 (the only writer) is the critical chain, warpgroup 0 waits ~1000 cycles a step at gate A;
# prediction +3..8% at D 64. Define A/B (two interleaved rounds, FA3 sweep D 64, bwd fast), then
# with the switch on: the D 64 backward tests, sanitize_bwd.py --dims 64, memcheck / racecheck of
# the quick set. ~5 minutes.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/dq_alt_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/dqalt
. "$(dirname "$0")/device_steps.sh"
OUT=$O INSTS="bwd_sm90_bf16_hd64" DIMS="64" ROUNDS=2 \
  bash "$TREE/scripts/dev/bwd_define_ab.sh" a0= a1='FLASHKIT_BWD_D64_DQ_ALT 1' > "$O/ab.log" 2>&1
# The A/B restored the files but left a1 installed: check that build (bf16; fp16 is as committed).
cd /tmp
step sanitize 200 python3 "$TREE/scripts/sanitize_bwd.py" --dims 64
step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
  test_backward_gpu.py test_backward_families_gpu.py -k 'not 256 and not pair'"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64
step racecheck 250 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64
tar -czf "${OUT:-/tmp}/dqalt.tgz" -C "$(dirname "$O")" "$(basename "$O")"
