#!/usr/bin/env bash
# Device run of the backward's dQ by TMA reduce-adds (kernel_pp.cuh kDqTma, default) against
# the per-thread reds of the same binary (FLASHKIT_BWD_DQ_TMA=0): the backward tests, memcheck
# of the small backward cases, then the FA3 sweep's backward at D 64/128 interleaved
# (tma, reds, tma, reds) with SDPA cuDNN once.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_dq_tma_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/dqtma
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install 300 "${INSTALL[@]}"
cd /tmp
step tests_fam 200 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider test_backward_families_gpu.py -k pp_tma"
step bwd_check 120 python3 "$TREE/scripts/dev/bwd_check.py"
BB() { step "$1" 150 env FLASHKIT_BWD_DQ_TMA=$2 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 --mode bwd --impls $3 --out-dir "$O/bench" --tag "$1"; }
BB tma1 1 "flashkit sdpa_cudnn"
BB reds1 0 flashkit
BB tma2 1 flashkit
BB reds2 0 flashkit
step tests_bwd 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_backward_gpu.py test_backward_families_gpu.py"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck_bwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_bwd.py" --quick
tar -czf "${OUT:-/tmp}/dqtma.tgz" -C "$(dirname "$O")" "$(basename "$O")"
