#!/usr/bin/env bash
# Device run: what the peers' (SDPA cuDNN) forward and backward kernels are, beside ours, on a few FA3-sweep shapes:
# every kernel of one call (names carry cuDNN's tile sizes), launch configuration (grid, block, registers, shared
# memory, cluster), L2 read / write / reduction sectors, DRAM bytes, tensor-pipe activity and executed instructions.
# The L2 read sectors say how often K / V are fetched per query row (two consumer warpgroups sharing one K / V ring
# against each reading its own). Sourced pieces: device_steps.sh (step, install_tree). Writes $O/<case>.txt.
#   CASES="mode D S causal;..." (mode fwd | bwd; default below); IMPLS="fk cudnn".
#   run(command="bash scripts/dev/peer_ncu_survey.sh")   (after install_tree, or standalone: it installs if needed)
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${O:-${OUT:-/tmp}/ncu_survey}
. "$(dirname "$0")/device_steps.sh"
python3 -c "import flashkit" 2>/dev/null || install_tree "$TREE"
cat > /tmp/survey_case.py <<'PY'
import sys, torch, flashkit
from torch.nn.attention import SDPBackend, sdpa_kernel
impl, mode, D, S, causal = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
H = 2048 // D; B = max(1, 16384 // S)
torch.manual_seed(0)
q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=(mode == "bwd")) for _ in range(3))
def fwd():
    if impl == "fk":
        return flashkit.attention(q, k, v, causal=causal)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)
for _ in range(2):  # warm-up (plans, autotuning)
    o = fwd()
    if mode == "bwd":
        o.backward(torch.ones_like(o))
torch.cuda.synchronize()
o = fwd() if mode == "bwd" else None
do = torch.randn_like(o) if mode == "bwd" else None
torch.cuda.synchronize()
torch.cuda.profiler.start()
if mode == "fwd":
    fwd()
else:
    o.backward(do)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
PY
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__cycles_elapsed.avg
IFS=';' read -r -a CS <<< "${CASES:-fwd 128 512 0;fwd 128 16384 0;bwd 128 16384 0;bwd 128 2048 1;bwd 64 16384 0}"
for c in "${CS[@]}"; do
  set -- $c
  for impl in ${IMPLS:-fk cudnn}; do
    name=${1}_d${2}_s${3}_c${4}_$impl
    (cd /tmp && step ncu_$name 150 /usr/local/cuda/bin/ncu --profile-from-start off --metrics $M --section LaunchStats \
      -c 12 python3 /tmp/survey_case.py $impl $1 $2 $3 $4)
    mv "$O/ncu_$name.log" "$O/$name.txt" 2>/dev/null
  done
done
