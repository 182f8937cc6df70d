#!/usr/bin/env bash
# Device run: ncu metrics of the forward kernel and cuDNN's (SDPA) on a few FA3-sweep shapes:
# tensor-pipe activity, L1/shared throughput, issue activity, stall breakdown.
# CONFIGS="D S causal;..." picks the shapes (default: D128 16k, 512, 512 causal; D256 16k).
#   run(carry=[".carry/cur"], command="[CONFIGS='64 16384 0;64 512 0'] bash .carry/cur/scripts/dev/fwd_ncu_compare.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ncu
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
cat > /tmp/case.py <<'PY'
import sys, torch, flashkit
from torch.nn.attention import SDPBackend, sdpa_kernel
impl, D, S, causal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
H = 2048 // D; B = 16384 // S
q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    if impl == "fk":
        flashkit.attention(q, k, v, causal=causal)
    else:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
torch.cuda.synchronize()
PY
M=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.sum,launch__block_size,launch__shared_mem_per_block_dynamic
IFS=';' read -r -a CFGS <<< "${CONFIGS:-128 16384 0;128 512 0;128 512 1;256 16384 0}"
for cfg in "${CFGS[@]}"; do
  set -- $cfg
  for impl in fk cudnn; do
    k=$([ $impl = fk ] && echo "regex:fwd_kernel" || echo "regex:fprop|sdpa|flash")
    echo "=== D$1 S$2 causal$3 $impl" >> "$O/ncu.txt"
    timeout 120 /usr/local/cuda/bin/ncu --metrics $M --section WarpStateStats -k "$k" -s 2 -c 1 python3 /tmp/case.py $impl $1 $2 $3 2>&1 \
      | grep -E "^ +[a-z_]+__|^ +launch__|Stall|Warp Cycles|void |cudnn_generated" | grep -v "^==PROF" >> "$O/ncu.txt"
  done
done
tar -czf "${OUT:-/tmp}/ncu.tgz" -C "$(dirname "$O")" "$(basename "$O")"
