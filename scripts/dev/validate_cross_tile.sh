#!/usr/bin/env bash
# (Ran against the kernel file archived in docs/kernels/fwd_sm90-logs/cross-tile-h100-2026-11-26/;
# the switches it flips exist only there: copy it over src/kernels/fwd_sm90/kernel_persistent.cuh first.)
# Device run: the persistent forward's double-buffered Q + cross-tile pipelining (FLASHKIT_FWD_DOUBLE_Q,
# FLASHKIT_FWD_CROSS_TILE in
# kernel_persistent.cuh) against one Q tile + an O staging tile, one machine session:
# build with the switch at 0, dump outputs and time; rebuild at 1, compare bitwise, time,
# then the forward tests and sanitizers with the persistent kernel forced on every call.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/validate_cross_tile.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/xt
. "$(dirname "$0")/device_steps.sh"
K="$TREE/src/kernels/fwd_sm90/kernel_persistent.cuh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
sed -i 's/^#define FLASHKIT_FWD_DOUBLE_Q 1/#define FLASHKIT_FWD_DOUBLE_Q 0/' "$K"
step install_single 300 "${INSTALL[@]}"
cd /tmp
step dump_single 120 env FLASHKIT_FWD_PERSISTENT=1 python3 "$TREE/scripts/dev/fwd_dump.py" save /tmp/single.pt
step bench_single 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag single; step dims_single 150 python3 "$TREE/scripts/dev/fwd_dims_check.py" 96 192
sed -i 's/^#define FLASHKIT_FWD_DOUBLE_Q 0/#define FLASHKIT_FWD_DOUBLE_Q 1/' "$K"
(cd "$TREE" && step install_double 300 "${INSTALL[@]}")
step compare_double 120 env FLASHKIT_FWD_PERSISTENT=1 python3 "$TREE/scripts/dev/fwd_dump.py" compare /tmp/single.pt
step bench_double 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --impls flashkit --out-dir "$O/bench" --tag double; step dims_double 150 python3 "$TREE/scripts/dev/fwd_dims_check.py" 96 192
step tests_persist 240 bash -c "cd $TREE/tests/python && FLASHKIT_FWD_PERSISTENT=1 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py test_index_hardening_gpu.py -x"
step memcheck_persist 150 env FLASHKIT_FWD_PERSISTENT=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
step racecheck_persist 150 env FLASHKIT_FWD_PERSISTENT=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
step synccheck_persist 150 env FLASHKIT_FWD_PERSISTENT=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool synccheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
tar -czf "${OUT:-/tmp}/xt.tgz" -C "$(dirname "$O")" "$(basename "$O")"
