#!/usr/bin/env bash
# Device calls owed after 2026-11-27 (twentieth session); each names the tree it runs on.
#   P (~4 min)   branch wip/decode-plan-smem (11da6cd + this script; check it out as the working tree):
#                the plan kernel's per-sequence arrays in shared memory for B <= 2048 (the item step's
#                binary search read item_base from global memory: one dependent L2 round trip per level).
#                Prediction: plan kernel -0.5 us at B 1, -1.5..-2.5 us at B 16..128 (profile); graph time
#                of a call the same amounts less (the split CTAs wait for the plan's completion). Env A/B
#                (FLASHKIT_DECODE_PLAN_GLOBAL=1 = the old arrays) interleaved twice, the per-kernel profile
#                of both, the decode / KV-cache GPU tests in both modes, memcheck and racecheck of
#                sanitize_decode.py --quick (racecheck matters: new shared-memory arrays read across threads
#                after a barrier; hazards in cuBLAS's nvjet kernels are the reference's, known). Also on the
#                branch: the combine grid sized by min(max_combines, B x hr) entries (B 1 GQA 32/8: 64 CTAs
#                instead of 528 / 1056 that mostly launch only to exit); FLASHKIT_DECODE_COMBINE_FULL_GRID=1
#                is the old size, a third column of the same A/B.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session12.sh P")   output pl.tgz
#                (The branch carries main's changes, so its test steps also cover M, and PQ = P then Q's A/B
#                on the same install: run(command="... next_session12.sh PQ"), ~7 min, outputs pl.tgz, q.tgz.)
#   M (~2 min)   main: the decode tests at main's head: 7b0aeba / 7ff93c1 restrict the tiny-grid 16-row rule
#                (host code only) to 16-bit caches and balanced plans; the batch-invariance test gained GQA 8 x
#                s_q 4 (32 rows per KV head, fixed split sizes), and test_quantized_cache_arguments the host
#                check of DecodePlan.run against a cache of another kind (0505813): never run on a GPU yet.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session12.sh M")   output m.tgz
#   Q (~2 min)   main: the one s_q row over issue 6's 1.3x (B 1 32/8 4k s_q 4: 16.8 us against 12.4 at s_q 1;
#                16-row items, 32 splits of 128 tokens per head, the combine merging 32 partials of 16 rows).
#                Does a longer shortest split pay where rows are many? FLASHKIT_DECODE_MIN_CHUNK 128 / 256 /
#                384 (it applies to every call, so the s_q 1 rows show its cost there), two interleaved rounds.
#   run(command="bash scripts/dev/next_session12.sh Q")                        output q.tgz
#   T (~5 min; last on its machine: it edits the tree's sources for a trace build) main: where the B 1
#                32/8 4k s_q 4 row's extra 4.4 us go (per-CTA timeline, split and combine phases):
#   run(command="DECODE_CASES='1:4096:32:8:bf16:1 1:4096:32:8:bf16:4 1:4096:64:8:bf16:4' bash scripts/dev/decode_trace.sh")
#                (decode_trace.sh also traces five forward shapes; output trace.tgz)
#   F (~6 min)   branch wip/fwd-d64-fallback-one-cta (44d0766 + this script): the d64 calls the three-warpgroup
#                kernel does not take (FLASHKIT_FWD_NO_TMA=1, FLASHKIT_FWD_PERSISTENT=0, FLASHKIT_FWD_D64_WG3=0,
#                strides no map describes) on the one-CTA kernels instead of the two-CTA one that spills (issue 8:
#                no spills in shipped instantiations). The forward / family GPU tests (they compare the variants
#                bitwise), the d64 tests under each fallback switch, memcheck / racecheck of sanitize_small.py
#                --quick --dims 64 with FLASHKIT_FWD_D64_WG3=0, and the FA3 sweep at D 64 with FLASHKIT_FWD_D64_WG3=0
#                (the fallback's own speed; the default calls do not change).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session12.sh F")   output f.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-P}" in
  PQ)
    bash "$0" P
    bash "$0" Q
    ;;
  P)
    O=${OUT:-/tmp}/pl
    . "$D/device_steps.sh"
    install_tree "$TREE"
    cd /tmp
    C="1:1024:32:8 1:16384:32:8 1:65536:32:8 16:8192:32:8 64:8192:32:8 128:4096:32:8 16:2048:32:32"
    for r in 1 2; do
      step "new-$r" 90 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --configs $C
      step "old-$r" 90 env FLASHKIT_DECODE_PLAN_GLOBAL=1 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 --configs $C
      step "fullgrid-$r" 90 env FLASHKIT_DECODE_COMBINE_FULL_GRID=1 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 fp8 \
        --configs $C
    done
    P3="1:16384:32:8 16:8192:32:8 128:4096:32:8"
    step profnew 60 python3 "$TREE/scripts/decode_quick_bench.py" --profile --configs $P3
    step profold 60 env FLASHKIT_DECODE_PLAN_GLOBAL=1 python3 "$TREE/scripts/decode_quick_bench.py" --profile --configs $P3
    (cd "$TREE/tests/python" && step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py test_index_hardening_gpu.py)
    (cd "$TREE/tests/python" && step tests_global 150 env FLASHKIT_DECODE_PLAN_GLOBAL=1 python3 -m pytest -q -m gpu -n 6 \
      -p no:cacheprovider test_decode_gpu.py)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    step memcheck 100 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
    step racecheck 100 $S --tool racecheck --print-limit 20 python3 "$TREE/scripts/sanitize_decode.py" --quick
    grep "Race reported" "$O/racecheck.log" | grep -v nvjet | head -5 >> "$O/summary.txt"
    tar -czf "${OUT:-/tmp}/pl.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  M)
    O=${OUT:-/tmp}/m
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd "$TREE/tests/python" && step tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py test_index_hardening_gpu.py)
    tar -czf "${OUT:-/tmp}/m.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  Q)
    O=${OUT:-/tmp}/q
    . "$D/device_steps.sh"
    install_tree "$TREE"
    cd /tmp
    C="1:4096:32:8 1:8192:32:8 1:16384:32:8 1:4096:64:8 2:4096:32:8"
    # per-kernel times of the row (s_q 1 against 4: the split kernel gained 0.7 us and the call 4.4 us
    # in the 2026-11-27 profile, so the rest sits in the combine or between the kernels)
    step prof 60 python3 "$TREE/scripts/decode_quick_bench.py" --profile --sq 1 2 4 --configs 1:4096:32:8
    for r in 1 2; do
      for m in 128 256 384; do
        step "mc$m-$r" 90 env FLASHKIT_DECODE_MIN_CHUNK=$m python3 "$TREE/scripts/decode_quick_bench.py" --sq 1 2 4 \
          --configs $C
      done
    done
    tar -czf "${OUT:-/tmp}/q.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  F)
    O=${OUT:-/tmp}/f
    . "$D/device_steps.sh"
    install_tree "$TREE"
    (cd "$TREE/tests/python" && step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_attention_gpu.py test_kernel_families_gpu.py)
    for e in FLASHKIT_FWD_NO_TMA=1 FLASHKIT_FWD_PERSISTENT=0 FLASHKIT_FWD_D64_WG3=0; do
      (cd "$TREE/tests/python" && step "tests_${e%%=*}" 200 env "$e" python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
        test_attention_gpu.py -k "64")
    done
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    step memcheck 150 env FLASHKIT_FWD_D64_WG3=0 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims 64
    step racecheck 150 env FLASHKIT_FWD_D64_WG3=0 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims 64
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    cd /tmp
    step bench 200 env FLASHKIT_FWD_D64_WG3=0 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 --impls flashkit sdpa_cudnn \
      --out-dir "$O/bench" --tag d64-fallback --no-plot
    tar -czf "${OUT:-/tmp}/f.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 P|PQ|M|Q|F" >&2; exit 2 ;;
esac
