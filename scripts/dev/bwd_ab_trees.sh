#!/usr/bin/env bash
# Device A/B of the backward between two trees (.carry/old and this one), interleaved
# old, new, old, new (each tree built once in its own build dir, reinstalled by pip), FA3
# sweep bf16 D 64/128 (DET=1: the deterministic mode timed after each fast run; DET=only: just it); the backward
# tests, memcheck and racecheck on the new tree (CHECKS=1: the tests only; CHECKS=0: neither;
# RACE_DIMS="64" narrows the racecheck, default "64 128").
#   run(carry=[".carry/cur", ".carry/old"], command="[DET=1] bash .carry/cur/scripts/dev/bwd_ab_trees.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
OLD=$(cd "$TREE/../old" && pwd)
O=${OUT:-/tmp}/bwdab
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
cd /tmp
BQ() {
  [ "${DET:-0}" = only ] || step "$1" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --impls flashkit --out-dir "$O/ab" --tag "$1"
  if [ "${DET:-0}" != 0 ]; then
    step "$1det" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --deterministic --impls flashkit \
      --out-dir "$O/ab" --tag "$1det"
  fi
}
install_cmd "$OLD"; I_OLD=("${INSTALL[@]}")
install_cmd "$TREE"; I_NEW=("${INSTALL[@]}")
step install_new 300 "${I_NEW[@]}"
step tests_fam 200 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider test_backward_families_gpu.py -k pp_tma"
BQ new1
step install_old 300 "${I_OLD[@]}"
BQ old1
step install_new2 300 "${I_NEW[@]}"
BQ new2
step install_old2 300 "${I_OLD[@]}"
BQ old2
step install_new3 300 "${I_NEW[@]}"
CHECKS=${CHECKS:-2}
[ "$CHECKS" -ge 1 ] && step tests_bwd 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py test_bwd_det_residency_gpu.py --durations=12"
if [ "$CHECKS" -ge 2 ]; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck_bwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick
  step racecheck_bwd 200 $S --tool racecheck --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims ${RACE_DIMS:-64 128}
fi
tar -czf "${OUT:-/tmp}/bwdab.tgz" -C "$(dirname "$O")" "$(basename "$O")"
