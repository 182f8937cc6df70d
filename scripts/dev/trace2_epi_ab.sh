#!/usr/bin/env bash
# Device run: (1) a trace build (FLASHKIT_DECODE_TRACE with the combine's sub-phases,
# FLASHKIT_FWD_TRACE=2: the forward epilogue's sub-phases) and its timelines; (2) the
# forward's direct-store epilogue (FLASHKIT_FWD_EPI_DIRECT, removed after this run: -3..-7%,
# fwd_sm90.md) against the staged one: outputs
# compared bitwise, forward tests, the FA3 sweep at D 128 with cuDNN, both builds.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/trace2_epi_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/t2
. "$(dirname "$0")/device_steps.sh"
P="$TREE/src/kernels/decode_params.h"
K="$TREE/src/kernels/fwd_sm90/kernel_persistent.cuh"
cp "$P" "$O/p.orig"; cp "$K" "$O/k.orig"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
sed -i 's/^#pragma once$/#pragma once\n#define FLASHKIT_DECODE_TRACE 1/' "$P"
sed -i 's/^#define FLASHKIT_FWD_TRACE 0$/#define FLASHKIT_FWD_TRACE 2/' "$K"
install_cmd "$TREE"
step install_trace 420 "${INSTALL[@]}"
cd /tmp
step decode_trace 240 python3 "$TREE/scripts/dev/decode_trace.py" 1:65536:32:8:fp8 1:65536:32:8:bf16 1:16384:32:8:fp8 16:8192:32:8:fp8
for c in "128 512 0" "128 1024 0" "128 512 1" "128 2048 0"; do
  step "fwd_trace_${c// /_}" 120 python3 "$TREE/scripts/dev/fwd_trace.py" $c epi
done
cp "$O/p.orig" "$P"; cp "$O/k.orig" "$K"
cd "$TREE" && step install_staged 420 "${INSTALL[@]}"; cd /tmp
step dump_staged 120 python3 "$TREE/scripts/dev/fwd_dump.py" save "$O/staged.pt"
step bench_staged 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag staged --no-plot
sed -i 's/^#define FLASHKIT_FWD_EPI_DIRECT 0$/#define FLASHKIT_FWD_EPI_DIRECT 1/' "$K"
cd "$TREE" && step install_direct 420 "${INSTALL[@]}"; cd /tmp
step compare_direct 120 python3 "$TREE/scripts/dev/fwd_dump.py" compare "$O/staged.pt"
step bench_direct 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --impls flashkit --out-dir "$O/bench" --tag direct --no-plot
step fwd_tests_direct 240 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py -x"
cp "$O/k.orig" "$K"
rm -f "$O"/*.pt
tar -czf "${OUT:-/tmp}/t2.tgz" -C "$(dirname "$O")" "$(basename "$O")"
