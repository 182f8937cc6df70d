#!/usr/bin/env bash
# Device run: the D 256 pair kernel for varlen calls (zero-filled tail copies of Q / dO, varlen TMA
# coordinates; 212 -> 238 registers). Tree A/B against .carry/old (the pair kernel without varlen)
# on the dense FA3 sweep D 256 (interleaved old, new, old, new; prediction: within +-1%), a varlen
# timing (4 x 4096 packed, H 8, causal and not: pair against FLASHKIT_BWD_KS_PAIR=0; prediction
# +5..9% as for the dense 4k rows), the pair tests (dense and varlen, bitwise dk/dv against the
# key-split kernel) and sanitize_bwd.py --dims 256 with pairs at every length, memcheck / racecheck
# / synccheck of its quick set. ~6 minutes.
#   run(carry=[".carry/cur", ".carry/old"], command="bash .carry/cur/scripts/dev/pair_varlen.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
OLD=$(cd "$TREE/../old" && pwd)
O=${OUT:-/tmp}/pairvl
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
install_cmd "$OLD"; I_OLD=("${INSTALL[@]}")
install_cmd "$TREE"; I_NEW=("${INSTALL[@]}")
cd /tmp
B() { step "$1" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd --impls flashkit --out-dir "$O/ab" --tag "$1" --no-plot; }
VL='import os, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(5)
lens, H, D = [4096] * 4, 8, 256
cu = torch.tensor([0, 4096, 8192, 12288, 16384], device="cuda", dtype=torch.int32)
for causal in (False, True):
    q, k, v, do = (torch.randn(16384, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    o, lse = flashkit.attention_varlen(q, k, v, cu, cu, 4096, 4096, causal=causal, return_lse=True)
    f = lambda: flashkit.attention_varlen_backward(do, q, k, v, o, lse, cu, cu, 4096, 4096, causal=causal)
    for _ in range(3): f()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20): f()
    b.record(); torch.cuda.synchronize()
    ms = a.elapsed_time(b) / 20
    flops = 2.5 * 4 * 4 * 4096 * 4096 * H * D / (2 if causal else 1)
    print("varlen 4x4096 causal=%d pair=%s %.3f ms %.1f TFLOPS" % (causal, os.environ.get("FLASHKIT_BWD_KS_PAIR", "default"), ms, flops / ms / 1e9))'
step install_old 300 "${I_OLD[@]}"
B old1
step install_new 300 "${I_NEW[@]}"
B new1
for r in 1 2; do
  step "vl_pair$r" 60 python3 -c "$VL"
  step "vl_ks$r" 60 env FLASHKIT_BWD_KS_PAIR=0 python3 -c "$VL"
done
grep -h "varlen 4x4096" "$O"/vl_*.log | tee -a "$O/summary.txt"
step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider test_backward_families_gpu.py -k pair"
step sanitize 200 env FLASHKIT_BWD_KS_PAIR=1 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256
step install_old2 300 "${I_OLD[@]}"
B old2
step install_new2 300 "${I_NEW[@]}"
B new2
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 FLASHKIT_BWD_KS_PAIR=1
for tool in memcheck racecheck synccheck; do
  step $tool 250 $S --tool $tool --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
    --quick --dims 256 --dtypes bfloat16
done
tar -czf "${OUT:-/tmp}/pairvl.tgz" -C "$(dirname "$O")" "$(basename "$O")"
