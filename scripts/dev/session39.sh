#!/usr/bin/env bash
# Device calls of the thirty-ninth session (2026-11-29), H200.
#   A: the peers' kernels beside ours (peer_ncu_survey.sh: forward D 128 at 512 / 16k, backward D 128 16k / 2k causal
#      and D 64 16k; names, launch configuration, L2 / DRAM traffic), then the MLA cache map's L2 promotion at pages of
#      32 tokens (FLASHKIT_MLA_L2_PROMO 256, the rule, against 128; ROUNDS interleaved rounds; mla.md "What is left").
#   B: the backward's chunked launch order (FLASHKIT_BWD_ORDER_CHUNK; bwd.md "Chunked launch order"): the new
#      GPU test, the backward GPU tests of causal / window / GQA calls with chunks of 8, memcheck of sanitize_bwd.py
#      --quick with chunks of 3; then the FA3 sweep's causal rows (bwd, D 64 / 128; BWD_ARGS overrides) for main
#      before the change (.carry/base: `git archive` of src include python CMakeLists.txt pyproject.toml cmake
#      bindings README.md) and this tree with chunks of 0 / 4 / 8 / 16, ROUNDS interleaved rounds.
#      run(carry=[".carry/base"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session39.sh B")
#   C: the chunked order's default (FLASHKIT_BWD_ORDER_CHUNK unset against 0) on the FA3 sweep's causal rows, MHA and
#      GQA 8, D 64 / 128; the key-split kernels (D 256, D 192's dims rows) with chunks of 0 / 4 / 8; the MLA FP8 cache's L2
#      promotion at 32 rows (FLASHKIT_MLA_L2_PROMO 256 / 128, flashkit_fp8, page 64); the MLA GPU tests. ROUNDS rounds.
#   F: the checks after the session's last kernel-side change: the backward GPU tests of the families file and of
#      D 192 / 256 in test_backward_gpu.py, memcheck of sanitize_bwd.py --quick (D 192 / 256 causal calls take the chunked
#      order by default there); the backward results with the peers (FA3 sweep, bwd and fwd_bwd, tag bwd-v17); the warp
#      stall reasons of the D 128 16k backward kernel against cuDNN's (ncu WarpStateStats).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session39.sh A")
set -u -o pipefail
PARTS=${1:?usage: session39.sh A}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s39
. "$(dirname "$0")/device_steps.sh"
pack() { tar -czf "${OUT:-/tmp}/s39.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
if [[ $PARTS == *A* ]]; then
  install_tree "$TREE"; pack
  O="$O/survey" bash "$TREE/scripts/dev/peer_ncu_survey.sh"; pack
  mla_env_ab FLASHKIT_MLA_L2_PROMO promo32_ "256 128" \
    "${MLA_ARGS:-"--heads 16 32 64 --sq 1 2 --seqlens 4096 16384 --modes fixed --page-sizes 32"}"
fi
if [[ $PARTS == *B* ]]; then
  install_tree "$TREE"; pack
  export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
  (cd /tmp && step order_test 300 python3 -m pytest -q -m gpu -p no:cacheprovider \
    "$TREE/tests/python/test_backward_families_gpu.py" -k chunked_launch_order)
  (cd /tmp && step causal_tests_c8 300 env FLASHKIT_BWD_ORDER_CHUNK=8 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider \
    "$TREE/tests/python/test_backward_gpu.py" -k "causal or window or gqa_split or varlen")
  tail -2 "$O/causal_tests_c8.log" >> "$O/summary.txt"
  (cd /tmp && step memcheck_c3 240 env FLASHKIT_BWD_ORDER_CHUNK=3 PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck \
    --error-exitcode 1 --print-limit 30 python3 "$TREE/scripts/sanitize_bwd.py" --quick)
  pack
  install_old "$TREE/.carry/base"; pack
  BA=${BWD_ARGS:-"--sweep fa3 --heads-dims 64 128 --causal yes"}
  for r in $(seq 1 ${ROUNDS:-2}); do
    (cd /tmp && step bwd_base_$r 200 env PYTHONPATH=/tmp/oldpkg python3 -m flashkit.bench --mode bwd $BA --impls flashkit \
      --out-dir "$O/bwd_base_$r" --no-plot); pack
    for c in ${CHUNKS:-0 4 8 16}; do
      (cd /tmp && step bwd_c${c}_$r 200 env FLASHKIT_BWD_ORDER_CHUNK=$c python3 -m flashkit.bench --mode bwd $BA \
        --impls flashkit --out-dir "$O/bwd_c${c}_$r" --no-plot); pack
    done
  done
fi
if [[ $PARTS == *C* ]]; then
  install_tree "$TREE"; pack
  export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
  (cd /tmp && step mla_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider "$TREE/tests/python/test_mla_gpu.py" \
    "$TREE/tests/python/test_mla_fp8_gpu.py")
  tail -n 1 "$O/mla_tests.log" >> "$O/summary.txt"; pack
  for r in $(seq 1 ${ROUNDS:-2}); do
    for c in def 0; do
      ev=""; [ $c = 0 ] && ev="FLASHKIT_BWD_ORDER_CHUNK=0"
      (cd /tmp && step pp_${c}_$r 200 env $ev python3 -m flashkit.bench --mode bwd --sweep fa3 --heads-dims 64 128 \
        --causal yes --impls flashkit --out-dir "$O/pp_${c}_$r" --no-plot)
      (cd /tmp && step gqa_${c}_$r 200 env $ev python3 -m flashkit.bench --mode bwd --sweep fa3 --heads-dims 64 128 \
        --causal yes --gqa 8 --impls flashkit --out-dir "$O/gqa_${c}_$r" --no-plot); pack
    done
    for c in 0 4 8; do
      (cd /tmp && step ks_${c}_$r 200 env FLASHKIT_BWD_ORDER_CHUNK=$c python3 -m flashkit.bench --mode bwd --sweep fa3 \
        --heads-dims 256 --causal yes --impls flashkit --out-dir "$O/ks_${c}_$r" --no-plot); pack
    done
  done
  mla_env_ab FLASHKIT_MLA_L2_PROMO fp8promo_ "256 128" \
    "--impls flashkit_fp8 --heads 16 32 --sq 1 2 --seqlens 4096 16384 --modes fixed --page-sizes 64"
fi
if [[ $PARTS == *F* ]]; then
  install_tree "$TREE"; pack
  export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
  (cd /tmp && step bwd_tests 240 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider \
    "$TREE/tests/python/test_backward_gpu.py" -k "D256 or D192")
  (cd /tmp && step bwd_fam_tests 200 python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider \
    "$TREE/tests/python/test_backward_families_gpu.py" -k "chunked or pair or d256 or pp_tma")
  tail -n 1 "$O/bwd_tests.log" "$O/bwd_fam_tests.log" >> "$O/summary.txt"; pack
  (cd /tmp && step memcheck_bwd 240 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 $S --tool memcheck --error-exitcode 1 --print-limit 30 \
    python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128 192 256)
  tail -n 2 "$O/memcheck_bwd.log" >> "$O/summary.txt"; pack
  (cd /tmp && step bwd_v17 300 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --mode bwd fwd_bwd \
    --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bwd_v17" --tag bwd-v17); pack
  cat > /tmp/stall_case.py <<'PY'
import sys, torch, flashkit
from torch.nn.attention import SDPBackend, sdpa_kernel
impl = sys.argv[1]
q, k, v = (torch.randn(1, 16384, 16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
def fwd():
    if impl == "fk":
        return flashkit.attention(q, k, v)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
for _ in range(2):
    o = fwd(); o.backward(torch.ones_like(o))
o = fwd(); do = torch.randn_like(o); torch.cuda.synchronize()
torch.cuda.profiler.start(); o.backward(do); torch.cuda.synchronize(); torch.cuda.profiler.stop()
PY
  for impl in fk cudnn; do
    (cd /tmp && step stalls_$impl 150 /usr/local/cuda/bin/ncu --profile-from-start off --section WarpStateStats \
      --section SchedulerStats -k "regex:bwd_pp|bprop" -c 1 python3 /tmp/stall_case.py $impl)
  done
fi
pack
