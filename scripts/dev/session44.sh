#!/usr/bin/env bash
# Device calls prepared in the forty-third session (2026-11-29) for the next one, H200 or H100.
#   A: the D 192 / 256 pair kernel's out_free wait at CTA scope too (FLASHKIT_BWD_PAIR_CTA_SCOPE 2; bwd.md "The pair
#      kernel's cluster-scope barriers": 1 took bwd D 256 +3.5 %; 2 drops two more CCTL.IVALL per fast kernel, 5 -> 3).
#      The four D 192 / 256 backward files built both ways (pip --target, once each); on the 2 build the pair tests and
#      memcheck / racecheck / synccheck of sanitize_bwd.py --quick --dims 192 256 with FLASHKIT_BWD_KS_PAIR=1 (every
#      call on the pair kernel); then ROUNDS (3) interleaved rounds of bwd D 256 (FA3 sweep, S >= 2k) and D 192 (dims
#      sweep, S >= 2k), fast mode. ~6 min.
#   B: where the pair kernel starts to pay, now that its barriers are CTA-scope (launch rules measured on an H100 with
#      the cluster-scope build: D 256 fast S_k >= 4k or unmasked >= 1k, deterministic >= 4k and unmasked <= 8k; D 192
#      unmasked >= 2k, masked >= 8k). One build (the tree as is), ROUNDS interleaved rounds of the environment's
#      FLASHKIT_BWD_KS_PAIR=1 FLASHKIT_BWD_KS_PAIR_DET=1 (pairs wherever they can run) against the rules: D 256 at S 512 ..
#      4k and 16k (deterministic non-causal 16k: -4 % on the H200 before), D 192 at 512 .. 4k, fast and deterministic.
#      The rows say which rule to move. ~5 min.
#   C: the forward's cluster kernels after the spill fix (no spills since 2026-11-29: the V-tail zeroing compiled out of
#      them, the half-tile loads arm their barrier after issuing the copies): the default build with
#      FLASHKIT_FWD_CLUSTER=1, the bitwise cluster test and the TMA loads test, memcheck / racecheck / synccheck of
#      sanitize_small.py --quick --dims 96 128 192. ~2 min (with A or B in the same call: no second build).
#      Also the whole of test_kernel_families_gpu.py: its A/B probes ran the same process twice until the runner fix
#      of 2026-11-29 (conftest run_probe applied its drop list after its set), so five of them run for real first here.
#   D: TMA stores in the non-persistent forward kernel (FLASHKIT_FWD_GRID_TMA_STORE=1, environment; fwd_sm90.md "TMA
#      stores in the grid kernel"): its bitwise test, memcheck / racecheck / synccheck of sanitize_small.py --quick
#      --dims 256 with the switch, then ROUNDS interleaved rounds off / on of FA3 D 256 (both causal settings) and of
#      D 128 causal 16k (the grid kernel past 64 row blocks). ~4 min.
#   E: why flashkit's fwd_bwd rows take longer than its fwd + bwd rows (v17 / v18: D 128 16k +0.70 ms of 14.2, where
#      cuDNN's take the sum): scripts/dev/fwd_bwd_split.py at D 128 16k, D 64 16k, D 256 8k (times in one process, the
#      step's kernels under torch.profiler, SM clock and power while each runs). ~1.5 min.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session44.sh CDE", timeout_s=600), then A, B the same way.
#   Decide from the medians (scripts/dev/ab_medians.py DIR ARM0 ARM1): a default or rule moves only where no row of its
#   range falls below the rounds' spread.
set -u -o pipefail
PARTS=${1:?usage: session44.sh A|B|C|D|E (or several, e.g. CDE)}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s44
. "$(dirname "$0")/device_steps.sh"
device_header
watchdog_start "${PACK_AT:-560}"
B256="--sweep fa3 --heads-dims 256"
B192="--sweep dims --heads-dims 192"
if [[ $PARTS == *A* ]]; then
  D=$TREE/src/kernels/bwd_sm90/inst
  inst_variants "$D/bwd_sm90_bf16_hd192.cu $D/bwd_sm90_fp16_hd192.cu $D/bwd_sm90_bf16_hd256.cu $D/bwd_sm90_fp16_hd256.cu" \
    "base=|s2=FLASHKIT_BWD_PAIR_CTA_SCOPE 2" 400
  (cd "$TREE/tests/python" && PYTHONPATH=/tmp/pkg_s2 OMP_NUM_THREADS=2 step tests_s2 200 python3 -m pytest -q -m gpu \
    -n 4 -p no:cacheprovider test_backward_families_gpu.py -k "pair")
  sanitizer_steps s2 "PYTHONPATH=/tmp/pkg_s2 FLASHKIT_BWD_KS_PAIR=1" "$TREE/scripts/sanitize_bwd.py" --quick \
    --dims 192 256 --allow-det-order
  pack
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    order="base s2"; [ $((r % 2)) = 0 ] && order="s2 base"
    for n in $order; do
      (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "bwd256_$n$r" 90 python3 -m flashkit.bench $B256 --seqlens 2k 4k 8k 16k \
        --mode bwd --impls flashkit --out-dir "$O/bench" --tag "a256-$n$r" --no-plot)
      (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "bwd192_$n$r" 90 python3 -m flashkit.bench $B192 --seqlens 2k 4k 8k 16k \
        --mode bwd --impls flashkit --out-dir "$O/bench" --tag "a192-$n$r" --no-plot)
    done
    pack
  done
fi
if [[ $PARTS == *B* ]]; then
  install_cmd "$TREE"; step install 400 "${INSTALL[@]}"
  pack
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    order="rule pair"; [ $((r % 2)) = 0 ] && order="pair rule"
    for n in $order; do
      e=""; [ $n = pair ] && e="FLASHKIT_BWD_KS_PAIR=1 FLASHKIT_BWD_KS_PAIR_DET=1"
      (cd /tmp && step "t256_$n$r" 120 env $e python3 -m flashkit.bench $B256 --seqlens 512 1k 2k 4k 16k --mode bwd \
        --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "b256-$n$r" --no-plot)
      (cd /tmp && step "t192_$n$r" 120 env $e python3 -m flashkit.bench $B192 --seqlens 512 1k 2k 4k --mode bwd \
        --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "b192-$n$r" --no-plot)
    done
    pack
  done
fi
INSTALLED=0; [[ $PARTS == *B* ]] && INSTALLED=1
if [[ $PARTS == *C* ]]; then
  [ $INSTALLED = 1 ] || { install_cmd "$TREE"; step install 400 "${INSTALL[@]}"; INSTALLED=1; }
  (cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step test_families 300 python3 -m pytest -q -m gpu -n 6 \
    -p no:cacheprovider test_kernel_families_gpu.py)
  # (the grid TMA kernels' SASS changed with 5e54a8a, its default path included: the D 256 forward tests on it)
  (cd "$TREE/tests/python" && OMP_NUM_THREADS=2 step test_fwd_d256 300 python3 -m pytest -q -m gpu -n 6 \
    -p no:cacheprovider test_attention_gpu.py -k "D256")
  sanitizer_steps cluster FLASHKIT_FWD_CLUSTER=1 "$TREE/scripts/sanitize_small.py" --quick --dims 96 128 192
  pack
fi
if [[ $PARTS == *D* ]]; then
  [ $INSTALLED = 1 ] || { install_cmd "$TREE"; step install 400 "${INSTALL[@]}"; INSTALLED=1; }
  [[ $PARTS == *C* ]] || (cd "$TREE/tests/python" && step test_grid_tma 200 python3 -m pytest -q -m gpu \
    -p no:cacheprovider test_kernel_families_gpu.py -k "grid_tma_store")
  sanitizer_steps grid FLASHKIT_FWD_GRID_TMA_STORE=1 "$TREE/scripts/sanitize_small.py" --quick --dims 256
  pack
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    order="off on"; [ $((r % 2)) = 0 ] && order="on off"
    for v in $order; do
      e="FLASHKIT_FWD_GRID_TMA_STORE=0"; [ $v = on ] && e="FLASHKIT_FWD_GRID_TMA_STORE=1"
      (cd /tmp && step "g256_$v$r" 90 env $e python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --impls flashkit \
        --out-dir "$O/bench" --tag "d256-$v$r" --no-plot)
      (cd /tmp && step "g128_$v$r" 60 env $e python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --causal yes \
        --seqlens 16k --impls flashkit --out-dir "$O/bench" --tag "d128-$v$r" --no-plot)
    done
    pack
  done
fi
if [[ $PARTS == *E* ]]; then
  [ $INSTALLED = 1 ] || { install_cmd "$TREE"; step install 400 "${INSTALL[@]}"; INSTALLED=1; }
  for c in "128 16384" "64 16384" "256 8192"; do
    set -- $c
    (cd /tmp && step "split_d$1_s$2" 90 python3 "$TREE/scripts/dev/fwd_bwd_split.py" --D $1 --S $2)
  done
  pack
fi
pack
watchdog_stop; exit 0
