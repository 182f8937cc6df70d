#!/usr/bin/env bash
# Device run of the experimental D 256 pair kernel (kernel_ks_pair.cuh, FLASHKIT_BWD_KS_PAIR=1;
# branch wip/ks-pair): the cluster probe first (the DSMEM primitives it uses), then correctness
# (sanitize_bwd.py --dims 256 with the switch, the two pair tests), the env A/B against the
# key-split kernel in one build (FA3 sweep D 256 bwd, two interleaved rounds; prediction +5..12%),
# and memcheck / racecheck / synccheck of sanitize_bwd.py --quick --dims 256 with the switch. ~7 min.
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/ks_pair_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/kspair
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"probe build tests ab sanit"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
if has probe; then
  step probe_build 120 /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$TREE/src" \
    -o /tmp/cluster_probe "$TREE/scripts/dev/cluster_probe.cu"
  step probe 60 /tmp/cluster_probe
  cat "$O/probe.log" >> "$O/summary.txt"
fi
has build && step install 400 "${INSTALL[@]}"
cd /tmp
# A small smoke call first (a protocol bug would hang here for 60 s, not in every later step).
SMOKE='import torch, flashkit
g = torch.Generator(device="cuda").manual_seed(1)
for causal in (False, True):
    q, k, v, do = (torch.randn(1, 300, 2, 256, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = flashkit.attention_backward(do, q, k, v, o, lse, causal=causal)
    torch.cuda.synchronize()
    assert all(torch.isfinite(x).all() for x in (dq, dk, dv))
print("smoke ok")'
step smoke 60 env FLASHKIT_BWD_KS_PAIR=1 python3 -c "$SMOKE"
if ! grep -q "smoke ok" "$O/smoke.log"; then
  echo "smoke failed: the other steps skipped" | tee -a "$O/summary.txt"
  STEPS=""
fi
if has tests; then
  step sanitize_pair 300 env FLASHKIT_BWD_KS_PAIR=1 python3 "$TREE/scripts/sanitize_bwd.py" --dims 256
  step tests_pair 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider \
    test_backward_families_gpu.py -k pair"
fi
if has ab; then
  for r in 1 2; do
    for v in ks pair; do
      e=FLASHKIT_BWD_KS_PAIR=0; [ $v = pair ] && e=FLASHKIT_BWD_KS_PAIR=1
      step "ab_$v$r" 150 env $e python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd --impls flashkit \
        --out-dir "$O/bench" --tag "pair-$v$r" --no-plot
    done
  done
fi
if has sanit; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1 FLASHKIT_BWD_KS_PAIR=1
  for tool in memcheck racecheck synccheck; do
    step "${tool}_pair" 300 $S --tool $tool --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
      --quick --dims 256
  done
fi
tar -czf "${OUT:-/tmp}/kspair.tgz" -C "$(dirname "$O")" "$(basename "$O")"
