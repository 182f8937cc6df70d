#!/usr/bin/env bash
# Device run: the quantized decode path's ring depth / tile size at D 128 (16-row items),
# each variant rebuilt incrementally (only decode_q_bf16_hd128.cu changes), checked by the
# quantized-cache tests, then timed against the bf16 cache (scripts/decode_quick_bench.py,
# CUDA-graph timing); plus ncu of the shipped variant's int8 kernel. Usage (device):
#   bash scripts/dev/decode_quant_sweep.sh "2:64 3:64 4:64 2:128"
set -u -o pipefail
VARIANTS=${1:-"2:64 3:64 4:64 2:128"}
CFGS=${CFGS:-"1:65536:32:8 16:8192:32:8 64:8192:32:8 16:16384:32:32 64:16384:64:8 128:4096:32:8"}
export TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=/tmp/dqs; mkdir -p "$O"
export CPLUS_INCLUDE_PATH=${CPLUS_INCLUDE_PATH:-/usr/local/cuda/include/cccl}
export CMAKE_BUILD_PARALLEL_LEVEL=16 PYTHONUNBUFFERED=1
INST="$TREE/src/kernels/decode/inst/decode_q_bf16_hd128.cu"
cp "$INST" "$O/inst.orig"
install() {
  python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$TREE/build/gpu" \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF "$TREE"
}
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$O/summary.txt"

for v in $VARIANTS; do
  st=${v%%:*}; bn=${v##*:}
  { echo "#define FLASHKIT_DECODE_QSTAGES_128 $st"; echo "#define FLASHKIT_DECODE_QBLOCKN_128 $bn"; cat "$O/inst.orig"; } > "$INST"
  t0=$SECONDS
  if ! timeout 300 bash -c "$(declare -f install); install" > "$O/build-$st-$bn.log" 2>&1; then
    echo "variant $v: BUILD FAILED" | tee -a "$O/summary.txt"; tail -20 "$O/build-$st-$bn.log" >> "$O/summary.txt"; continue
  fi
  echo "variant stages=$st blockn=$bn built in $((SECONDS - t0))s" | tee -a "$O/summary.txt"
  (cd "$TREE/tests/python" && timeout 200 python3 -m pytest -q -x -p no:cacheprovider test_decode_gpu.py -k "quantized" 2>&1 | tail -2) | tee -a "$O/summary.txt"
  (cd /tmp && timeout 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CFGS \
     --csv "$O/bench-$st-$bn.csv" 2>&1) > "$O/bench-$st-$bn.log"
  grep -v "^#" "$O/bench-$st-$bn.log" | tail -20 >> "$O/summary.txt"
  if [ "$v" = "2:64" ] && [ "${NCU:-1}" = 1 ]; then
    (cd /tmp && timeout 240 /usr/local/cuda/bin/ncu --kernel-name regex:decode_split --launch-skip 40 --launch-count 1 \
       --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
       --section SchedulerStats python3 "$TREE/scripts/decode_quick_bench.py" --kv int8 --configs 64:8192:32:8 > "$O/ncu-int8-2-64.txt" 2>&1)
    grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Eligible Warps|Active Warps Per|No Eligible|Issued Warp|Warp Cycles Per Issued|Stall" "$O/ncu-int8-2-64.txt" | head -40 >> "$O/summary.txt"
  fi
done
cp "$O/inst.orig" "$INST"
cp "$O/summary.txt" "$OUT/summary.txt"
tar -czf "$OUT/dqs.tgz" -C "$O" .
