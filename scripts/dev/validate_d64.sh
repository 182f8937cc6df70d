#!/usr/bin/env bash
# Device run: d64 at one CTA per SM (FLASHKIT_FWD_D64_ONE_CTA=1: producer warpgroup, TMA,
# persistent kernel) against the shipped two-CTA cp.async kernel, one machine session.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/validate_d64.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/d64
. "$(dirname "$0")/device_steps.sh"
L="$TREE/src/launch/fwd_sm90_launch.cuh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install_two 300 "${INSTALL[@]}"
cd /tmp
step dump_two 120 python3 "$TREE/scripts/dev/fwd_dump.py" save /tmp/two.pt
step bench_two 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag d64-two
sed -i 's/^#define FLASHKIT_FWD_D64_ONE_CTA 0/#define FLASHKIT_FWD_D64_ONE_CTA 1/' "$L"
(cd "$TREE" && step install_one 300 "${INSTALL[@]}")
step compare_one 120 python3 "$TREE/scripts/dev/fwd_dump.py" compare /tmp/two.pt
step bench_one 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag d64-one
step tests_one 200 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py -k '64' -x"
step memcheck_one 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims 64
step racecheck_one 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims 64
sed -i 's/^#define FLASHKIT_FWD_D64_ONE_CTA 1/#define FLASHKIT_FWD_D64_ONE_CTA 0/' "$L"
tar -czf "${OUT:-/tmp}/d64.tgz" -C "$(dirname "$O")" "$(basename "$O")"
