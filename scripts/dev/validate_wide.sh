#!/usr/bin/env bash
# Device run: the forward's wide wgmmas (FLASHKIT_FWD_WIDE_WGMMA, src/kernels/fwd_sm90/kernel.cuh)
# against the n64-only shape, one machine session: install (wide), dump outputs + forward tests
# + FA3 sweep with cuDNN; rebuild with the switch at 0, compare the outputs bitwise, sweep again.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/validate_wide.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/wide
. "$(dirname "$0")/device_steps.sh"
K="$TREE/src/kernels/fwd_sm90/kernel.cuh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install_wide 300 "${INSTALL[@]}"
cd /tmp
step dump_wide 120 python3 "$TREE/scripts/dev/fwd_dump.py" save "$O/wide.pt"
step bench_wide 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag wide
[ -n "${TESTS-1}" ] && step fwd_tests 200 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py -x"
sed -i 's/^#define FLASHKIT_FWD_WIDE_WGMMA 1/#define FLASHKIT_FWD_WIDE_WGMMA 0/' "$K"
cd "$TREE" && step install_n64 300 "${INSTALL[@]}"; cd /tmp
step compare_n64 120 python3 "$TREE/scripts/dev/fwd_dump.py" compare "$O/wide.pt"
step bench_n64 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --impls flashkit --out-dir "$O/bench" --tag n64
sed -i 's/^#define FLASHKIT_FWD_WIDE_WGMMA 0/#define FLASHKIT_FWD_WIDE_WGMMA 1/' "$K"
tar -czf "${OUT:-/tmp}/wide.tgz" -C "$(dirname "$O")" "$(basename "$O")"
