#!/usr/bin/env bash
# Device run: decode tuning variants at D 128, bf16 q: STAGES:BLOCKN of the quantized path
# (16-row items) and SPLIT (FLASHKIT_DECODE_SPLIT_KV_WAIT, both caches), each rebuilt
# incrementally (only decode_q_bf16_hd128.cu and decode_bf16_hd128.cu change), checked by
# the decode tests (racecheck too where SPLIT=1), then timed, bf16 vs int8 vs fp8 caches
# (scripts/decode_quick_bench.py, CUDA-graph timing); NCU=1: ncu of the first variant's
# int8 kernel. Usage (device):
#   bash scripts/dev/decode_quant_sweep.sh "2:64:0 2:64:1"
set -u -o pipefail
VARIANTS=${1:-"2:64:0 2:64:1"}
export TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=/tmp/dqs; mkdir -p "$O"
export CPLUS_INCLUDE_PATH=${CPLUS_INCLUDE_PATH:-/usr/local/cuda/include/cccl}
export CMAKE_BUILD_PARALLEL_LEVEL=16 PYTHONUNBUFFERED=1
INST="$TREE/src/kernels/decode/inst/decode_q_bf16_hd128.cu"
INST16="$TREE/src/kernels/decode/inst/decode_bf16_hd128.cu"
cp "$INST" "$O/inst.orig"; cp "$INST16" "$O/inst16.orig"
install() {
  python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$TREE/build/gpu" \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF "$TREE"
}
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$O/summary.txt"
CFGS="1:1024:32:8 1:65536:32:8 16:8192:32:8 64:8192:32:8 16:16384:32:32 64:16384:64:8 128:4096:32:8"
for v in $VARIANTS; do
  IFS=: read -r st bn sp <<< "$v"; sp=${sp:-0}
  { echo "#define FLASHKIT_DECODE_QSTAGES_128 $st"; echo "#define FLASHKIT_DECODE_QBLOCKN_128 $bn";
    echo "#define FLASHKIT_DECODE_SPLIT_KV_WAIT $sp"; cat "$O/inst.orig"; } > "$INST"
  { echo "#define FLASHKIT_DECODE_SPLIT_KV_WAIT $sp"; cat "$O/inst16.orig"; } > "$INST16"
  t0=$SECONDS
  if ! timeout 300 bash -c "$(declare -f install); install" > "$O/build-$st-$bn-$sp.log" 2>&1; then
    echo "variant $v: BUILD FAILED" | tee -a "$O/summary.txt"; tail -20 "$O/build-$st-$bn-$sp.log" >> "$O/summary.txt"; continue
  fi
  echo "variant stages=$st blockn=$bn split=$sp built in $((SECONDS - t0))s" | tee -a "$O/summary.txt"
  (cd "$TREE/tests/python" && timeout 200 python3 -m pytest -q -x -p no:cacheprovider -n 4 test_decode_gpu.py 2>&1 | tail -2) | tee -a "$O/summary.txt"
  if [ "$sp" = 1 ]; then
    (cd /tmp && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck \
       --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick 2>&1 | tail -3) | tee -a "$O/summary.txt"
  fi
  (cd /tmp && timeout 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CFGS \
     --csv "$O/bench-$st-$bn-$sp.csv" 2>&1) > "$O/bench-$st-$bn-$sp.log"
  tail -22 "$O/bench-$st-$bn-$sp.log" >> "$O/summary.txt"
  if [ "$v" = "${VARIANTS%% *}" ] && [ "${NCU:-0}" = 1 ]; then
    (cd /tmp && timeout 240 /usr/local/cuda/bin/ncu --kernel-name regex:decode_split --launch-skip 40 --launch-count 1 \
       --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
       --section SchedulerStats python3 "$TREE/scripts/decode_quick_bench.py" --kv int8 --configs 64:8192:32:8 > "$O/ncu-int8-2-64.txt" 2>&1)
    grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Eligible Warps|Active Warps Per|No Eligible|Issued Warp|Warp Cycles Per Issued|Stall" "$O/ncu-int8-2-64.txt" | head -40 >> "$O/summary.txt"
  fi
done
cp "$O/inst.orig" "$INST"; cp "$O/inst16.orig" "$INST16"
cp "$O/summary.txt" "$OUT/summary.txt"
tar -czf "$OUT/dqs.tgz" -C "$O" .
