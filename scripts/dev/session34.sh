#!/usr/bin/env bash
# Device calls of the thirty-fourth session (2026-11-28, H200): the results files of the backward and the
# decode families on the GPU the device tool lends now (their last runs with peers were H100 runs:
# bwd v15, decode v15; the bars of issues 6 and 9 accept an H100 or an H200, one run).
#   W (~6 min): install; backward + forward/backward FA3 sweep bf16 D 64/128/256 with cuDNN and FA2
#      (no deterministic rows: bwd-det-h200-2026-11-28 has them); the quantized decode table (issue 10);
#      the decode DRAM-bytes survey against cuDNN (decode.md "Next measurement").
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session34.sh W")
#   D (~8 min): install; the decode sweep with FlashInfer (.carry/flashinfer, bench/peers/flashinfer/build.sh),
#      both parts (B 1 / 16 and B 64 / 128) in one call.
#   run(carry=[".carry/flashinfer"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session34.sh D")
#   L (~3 min): where decode loses to cuDNN at B >= 16 on the H200 (v16: 0.92-0.99x): the page layout (NHD /
#      HND, pages in order / permuted), one CTA per (sequence, KV head) (split_size = S_k, cuDNN's grid), and
#      cuDNN on the contiguous copy, all graph-timed in scripts/decode_quick_bench.py.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session34.sh L")
#   N (~2 min): ncu of one decode step at B 16 8k GQA 32/8 (FlashKit's split kernel at page 16, cuDNN's on the
#      contiguous copy): instructions, issue, warp states and stall reasons, occupancy, memory throughput.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session34.sh N")
set -u -o pipefail
PART=${1:?usage: session34.sh W|D}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s34-$PART
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
cd /tmp
case $PART in
  W)
    step bwd 330 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --mode bwd fwd_bwd \
      --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag bwd-v16 --no-plot
    step quant 120 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs 1:65536:32:8 \
      1:16384:32:8 16:8192:32:8 16:16384:32:32 64:8192:32:8 64:16384:32:8 128:4096:32:8 128:8192:32:8 --csv "$O/quant.csv"
    (OUT=$O CASES="decode 16 4096 1;decode 16 8192 1;decode 64 8192 1" timeout 200 bash "$TREE/scripts/dev/dram_survey.sh" \
      > "$O/dram_survey.log" 2>&1)
    ;;
  D)
    export FLASHKIT_FLASHINFER_PATH=$TREE/.carry/flashinfer
    step sweepA 280 python3 -m flashkit.bench --op decode --batch 1 16 --out-dir "$O/A" --tag b1-16
    step sweepB 280 python3 -m flashkit.bench --op decode --batch 64 128 --out-dir "$O/B" --tag b64-128
    ;;
  L)
    step layout 300 python3 "$TREE/scripts/decode_quick_bench.py" --layout nhd hnd --table perm seq --split-size 0 \
      16384 --cudnn --configs 16:8192:32:8 64:8192:32:8 16:16384:32:32 128:4096:32:8 1:65536:32:8 --csv "$O/layout.csv"
    tail -60 "$O/layout.log"
    ;;
  N)
    for impl in fk cudnn; do
      timeout 120 /usr/local/cuda/bin/ncu --profile-from-start off --section SpeedOfLight --section SchedulerStats \
        --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats \
        --section MemoryWorkloadAnalysis python3 "$TREE/scripts/dev/dram_survey.py" $impl decode 16 8192 1 \
        > "$O/ncu-$impl.txt" 2>&1
      echo "ncu $impl rc=$?" >> "$O/summary.txt"
    done
    grep -E "decode_split|cudnn_generated|Duration|Executed Ipc A|Issue Slots Busy|Eligible Warps|Active Warps Per|No Eligible|Executed Instructions  |Registers Per|Achieved Occupancy|Memory Throughput|DRAM Throughput|Warp Cycles Per Issued|Block Size|Grid Size|Dynamic Shared" \
      "$O/ncu-fk.txt" "$O/ncu-cudnn.txt" | grep -v "decode_combine" | cut -c1-150
    ;;
  *) echo "usage: $0 W|D|L|N" >&2; exit 2 ;;
esac
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/s34-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
