#!/usr/bin/env bash
# Device run: d64 on the three-consumer-warpgroup persistent kernel (FLASHKIT_FWD_D64_WG3, on by
# default; =0 in the environment keeps every d64 call on the two-CTA cp.async kernel) against
# the two-CTA kernel, same build, one machine session. STEPS picks the phases (default all):
#   install  build + pip install the tree (sm_90a only)
#   dump     outputs of fwd_dump.py's 100 shapes, two-CTA saved, three-warpgroup compared bitwise
#   bench    ROUNDS interleaved rounds of the FA3 sweep at d64 (DTYPE), cuDNN in the first
#   bench2   one round of FLASHKIT_FWD_D64_WG3=0 / =1 / default, fp16 rows, the long causal rows forced
#   dump1    as dump, with FLASHKIT_FWD_D64_WG3=1 (causal calls on the three-warpgroup kernel too)
#   causal   the causal d64 rows, =0 and =1, bf16 and fp16, ROUNDS rounds
#   final    the d64 rows for the results file (bf16 with cuDNN and FA2, fp16 quick with cuDNN;
#            set FLASHKIT_COMMIT to the tree's commit)
#   tests    forward + family GPU tests (d64 cases)
#   sanitize memcheck, racecheck and synccheck of sanitize_small.py --quick --dims 64
#   window   d64 causal 8k/16k with a causal window of 4096 (issue 9's window bar: visible-pair
#            TFLOPS >= 0.9x full causal), FLASHKIT_FWD_D64_WG3=0 and default, bf16, ROUNDS rounds
#   run(command="STEPS='install dump tests sanitize' bash scripts/dev/validate_d64_wg3.sh")  (from the repo root)
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/d64wg3
. "$(dirname "$0")/device_steps.sh"
STEPS=${STEPS:-"install dump bench tests sanitize"}
ROUNDS=${ROUNDS:-1}
DTYPE=${DTYPE:-bf16}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
(cd "$TREE" && git log -1 --format=%h 2>/dev/null) | tee -a "$O/summary.txt"
has install && step install 400 "${INSTALL[@]}"
cd /tmp
if has dump; then
  step dump_two 150 env FLASHKIT_FWD_D64_WG3=0 python3 "$TREE/scripts/dev/fwd_dump.py" save /tmp/two.pt
  step dump_wg3 150 python3 "$TREE/scripts/dev/fwd_dump.py" compare /tmp/two.pt
fi
if has bench; then
  for ((r = 1; r <= ROUNDS; r++)); do
    impls="flashkit"
    [ "$r" = 1 ] && impls="flashkit sdpa_cudnn"
    step "bench_two$r" 200 env FLASHKIT_FWD_D64_WG3=0 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 \
      --dtype $DTYPE --impls $impls --out-dir "$O/bench" --tag "two$r" --no-plot
    step "bench_wg3$r" 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --dtype $DTYPE \
      --impls flashkit --out-dir "$O/bench" --tag "wg3$r" --no-plot
  done
fi
if has bench2; then  # the dispatch's choices: forced (=1), default (causal S < 2k on the two-CTA kernel), off (=0)
  for v in 0 1 default; do
    e=(env FLASHKIT_FWD_D64_WG3=$v); [ $v = default ] && e=(env)
    step "bench2_$v" 200 "${e[@]}" python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --dtype $DTYPE \
      --impls flashkit --out-dir "$O/bench" --tag "b2-$v" --no-plot
  done
  step bench_fp16_0 200 env FLASHKIT_FWD_D64_WG3=0 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --dtype fp16 \
    --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag fp16-0 --no-plot
  step bench_fp16_default 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --dtype fp16 \
    --impls flashkit --out-dir "$O/bench" --tag fp16-default --no-plot
  # causal S_q > 64 x 192 (the persistent walk is not the default there): forced on
  step bench_causal_long 200 env FLASHKIT_FWD_PERSISTENT=1 FLASHKIT_FWD_D64_WG3=1 python3 -m flashkit.bench --sweep fa3 \
    --heads-dims 64 --dtype $DTYPE --causal yes --seqlens 8192 16384 --impls flashkit --out-dir "$O/bench" --tag clong --no-plot
fi
if has dump1; then  # every d64 call on the three-warpgroup kernel (causal ones too), against the two-CTA kernel
  step dump1_two 150 env FLASHKIT_FWD_D64_WG3=0 python3 "$TREE/scripts/dev/fwd_dump.py" save /tmp/two.pt
  step dump1_wg3 150 env FLASHKIT_FWD_D64_WG3=1 python3 "$TREE/scripts/dev/fwd_dump.py" compare /tmp/two.pt
fi
if has causal; then  # the causal rows, two-CTA (=0) and three-warpgroup everywhere (=1), ROUNDS rounds
  for ((r = 1; r <= ROUNDS; r++)); do
    for dt in bf16 fp16; do
      for v in 0 1; do
        step "causal_${dt}_$v$r" 200 env FLASHKIT_FWD_D64_WG3=$v python3 -m flashkit.bench --sweep fa3 --heads-dims 64 \
          --dtype $dt --causal yes --impls flashkit --out-dir "$O/bench" --tag "causal-$dt-$v$r" --no-plot
      done
    done
  done
fi
if has final; then  # the d64 rows of the results file: FA3 sweep bf16 with both peers, fp16 quick with cuDNN
  export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}
  step final_bf16 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --impls flashkit sdpa_cudnn sdpa_flash \
    --out-dir "$O/bench" --tag final-bf16 --no-plot
  step final_fp16 200 python3 -m flashkit.bench --sweep fa3 --quick --heads-dims 64 --dtype fp16 \
    --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag final-fp16 --no-plot
fi
if has window; then
  for ((r = 1; r <= ROUNDS; r++)); do
    for v in 0 default; do
      e=(env FLASHKIT_FWD_D64_WG3=$v); [ $v = default ] && e=(env)
      step "window_$v$r" 200 "${e[@]}" python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --dtype $DTYPE \
        --causal yes --seqlens 8192 16384 --window 4096 --impls flashkit --out-dir "$O/bench" --tag "win-$v$r" --no-plot
    done
  done
fi
if has tests; then
  step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py -k '64 or tma or persistent'"
fi
if has sanitize; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    step "$tool" 200 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims 64
  done
fi
tar -czf "${OUT:-/tmp}/d64wg3.tgz" -C "$(dirname "$O")" "$(basename "$O")"
