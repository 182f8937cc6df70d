#!/usr/bin/env bash
# Device run: which warpgroup of the D 64 / 128 ping-pong backward issues the row-block loads
# (FLASHKIT_BWD_PP_LOADER_WG_D128 / _D64, pp_traits.cuh). The step trace put warpgroup 0's
# chain ~560 cycles a step over warpgroup 1's at D 128 (the loads) while warpgroup 1 waited
# ~600 cycles at gate A; prediction: loader 1 is +4..7% at D 128 and a loss at D 64 (where
# warpgroup 1 is the critical one). Define A/B (two interleaved rounds, FA3 sweep D 64 / 128,
# bwd fast), then with loader 1 built: the D 64 / 128 backward tests, sanitize_bwd.py, the
# deterministic rows, racecheck / memcheck of the quick set. ~6 minutes.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/pp_loader_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/pploader
. "$(dirname "$0")/device_steps.sh"
OUT=$O INSTS="bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128" DIMS="64 128" ROUNDS=2 \
  bash "$TREE/scripts/dev/bwd_define_ab.sh" l0= \
  l1='FLASHKIT_BWD_PP_LOADER_WG_D128 1;FLASHKIT_BWD_PP_LOADER_WG_D64 1' > "$O/ab.log" 2>&1
# The A/B restored the files but left l1 installed: check that build.
cd /tmp
step sanitize 200 python3 "$TREE/scripts/sanitize_bwd.py" --dims 64 128
step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
  test_backward_gpu.py test_backward_families_gpu.py -k 'not 256 and not pair'"
step det 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --impls flashkit_deterministic \
  --out-dir "$O/bench" --tag det-l1 --no-plot
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128
step racecheck 250 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128
tar -czf "${OUT:-/tmp}/pploader.tgz" -C "$(dirname "$O")" "$(basename "$O")"
