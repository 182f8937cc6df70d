#!/usr/bin/env bash
# Device calls prepared in the forty-second session (2026-11-29) for the next one, H200 or H100.
#   A: the forward's K / V multicast in clusters of two (FLASHKIT_FWD_CLUSTER=1, read once per process; fwd_sm90.md
#      "K / V multicast in clusters of two") after the fix of 57c6508 (CTA-scope pair releases: no MEMBAR.ALL.GPU in
#      the main loop). Build; ncu's launch statistics of one D 128 16k call with the switch (grid and cluster size:
#      are 66 clusters resident?); the bitwise test against one CTA per SM (+ the TMA loads test); memcheck /
#      racecheck / synccheck of sanitize_small.py --quick --dims 96 128 192 with the switch; then ROUNDS (3)
#      interleaved rounds, order alternated, off / on: FA3 D 128 non-causal, dims D 96 / 192 non-causal. ~6 min.
#   B: the backward pair kernel's barriers at CTA scope (FLASHKIT_BWD_PAIR_CTA_SCOPE, bwd.md "The pair kernel's
#      cluster-scope barriers"): the D 192 / 256 backward files built both ways (pip --target, once each), the pair
#      kernel's tests on the switch's build, then ROUNDS interleaved rounds of bwd D 256 (FA3 sweep, S >= 2k). ~5 min.
#   C: the TMA forward kernels' gates without the cp.async kernel's proxy fence (FLASHKIT_FWD_GATE_FENCE 0, fwd_sm90.md
#      "The gates' proxy fence"): the forward files built both ways (pip --target), the forward GPU tests and racecheck /
#      synccheck of sanitize_small.py --quick on the switch's build, then ROUNDS interleaved rounds of FA3 D 64 / 128 /
#      256 and the dims sweep, both causal settings. ~7 min.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session43.sh A", timeout_s=600), then B, C the same way.
#   Decide from the medians of the rounds: a default flips only if no row falls outside the rounds' spread.
set -u -o pipefail
PARTS=${1:?usage: session43.sh A|B|C}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s43
. "$(dirname "$0")/device_steps.sh"
device_header
watchdog_start "${PACK_AT:-560}"
if [[ $PARTS == *A* ]]; then
  install_cmd "$TREE"; step install 400 "${INSTALL[@]}"
  pack
  (cd /tmp && FLASHKIT_FWD_CLUSTER=1 step ncu_launch 120 /usr/local/cuda/bin/ncu --section LaunchStats --section Occupancy \
    -k regex:fwd_kernel_persistent -c 1 python3 -c "
import torch, flashkit
q = torch.randn(1, 16384, 16, 128, device='cuda', dtype=torch.bfloat16)
flashkit.attention(q, q, q)
torch.cuda.synchronize()")
  grep -E "Grid Size|Cluster Size|Block Size|Waves|Max Active Clusters|Cluster Scheduling" "$O/ncu_launch.log" >> "$O/summary.txt"
  (cd "$TREE/tests/python" && step test_cluster 120 python3 -m pytest -q -m gpu -p no:cacheprovider \
    test_kernel_families_gpu.py -k "cluster_multicast or tma_loads_match")
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    FLASHKIT_FWD_CLUSTER=1 step ${tool}_cluster 150 $S --tool $tool --error-exitcode 1 python3 \
      "$TREE/scripts/sanitize_small.py" --quick --dims 96 128 192
  done
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  pack
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    order="off on"; [ $((r % 2)) = 0 ] && order="on off"
    for v in $order; do
      e=""; [ $v = on ] && e="FLASHKIT_FWD_CLUSTER=1"
      (cd /tmp && step "fa3_$v$r" 60 env $e python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --causal no \
        --impls flashkit --out-dir "$O/bench" --tag "fa3-$v$r" --no-plot)
      (cd /tmp && step "dims_$v$r" 60 env $e python3 -m flashkit.bench --sweep dims --causal no --impls flashkit \
        --out-dir "$O/bench" --tag "dims-$v$r" --no-plot)
    done
    pack
  done
fi
if [[ $PARTS == *B* ]]; then
  D=$TREE/src/kernels/bwd_sm90/inst
  inst_variants "$D/bwd_sm90_bf16_hd192.cu $D/bwd_sm90_fp16_hd192.cu $D/bwd_sm90_bf16_hd256.cu $D/bwd_sm90_fp16_hd256.cu" \
    "base=|cta=FLASHKIT_BWD_PAIR_CTA_SCOPE 1" 400
  # the pair kernel's tests (reference, bitwise against the single-CTA kernel, deterministic) on the switch's build
  (cd "$TREE/tests/python" && PYTHONPATH=/tmp/pkg_cta OMP_NUM_THREADS=2 step tests_cta 300 python3 -m pytest -q -m gpu \
    -n 4 -p no:cacheprovider test_backward_families_gpu.py -k "pair")
  pack
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    order="base cta"; [ $((r % 2)) = 0 ] && order="cta base"
    for n in $order; do
      (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "bwd_$n$r" 90 python3 -m flashkit.bench --sweep fa3 --heads-dims 256 \
        --seqlens 2048 4096 8192 16384 --mode bwd --impls flashkit --out-dir "$O/bench" --tag "bwd-$n$r" --no-plot)
    done
    pack
  done
fi
if [[ $PARTS == *C* ]]; then
  inst_variants "$(ls "$TREE"/src/kernels/fwd_sm90/inst/*.cu | tr '\n' ' ')" "base=|nofence=FLASHKIT_FWD_GATE_FENCE 0" 400
  (cd "$TREE/tests/python" && PYTHONPATH=/tmp/pkg_nofence step tests_nofence 300 python3 -m pytest -q -m gpu -n 6 \
    -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py)
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in racecheck synccheck; do
    PYTHONPATH=/tmp/pkg_nofence step ${tool}_nofence 150 $S --tool $tool --error-exitcode 1 python3 \
      "$TREE/scripts/sanitize_small.py" --quick
  done
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  pack
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    order="base nofence"; [ $((r % 2)) = 0 ] && order="nofence base"
    for n in $order; do
      (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "fa3_$n$r" 90 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 \
        256 --impls flashkit --out-dir "$O/bench" --tag "gf-fa3-$n$r" --no-plot)
      (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "dims_$n$r" 90 python3 -m flashkit.bench --sweep dims --impls flashkit \
        --out-dir "$O/bench" --tag "gf-dims-$n$r" --no-plot)
    done
    pack
  done
fi
pack
watchdog_stop; exit 0
