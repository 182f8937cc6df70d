#!/usr/bin/env bash
# Device call prepared in the forty-first session (2026-11-29) for the next one, H200 or H100.
#   A: the forward's Q in registers (FLASHKIT_FWD_RS_Q, fwd_sm90.md "Q in registers at D 128") at D 96 / 128 / 192,
#      with the proxy fence before Q's early release (3eba33e): the six D 96 / 128 / 192 instantiation files built
#      with the switch, then (1) the window / softcap varlen tests REPS times (the first build's race showed there in
#      2 of 5 runs), (2) test_attention_gpu.py + test_kernel_families_gpu.py, (3) memcheck / racecheck / synccheck of
#      sanitize_small.py --quick --dims 96 128 192, (4) fwd_dump.py save (plain and FWD_DUMP_MODS=1) into build/dumps
#      for B's bitwise comparison (run B right after A, while the machine is warm, or as "AB" in one call). Includes the one-address fragment loads of 7775ff8 (no spills). ~5 min.
#   B: ROUNDS interleaved rounds of the default and the switch: FA3 sweep D 128 and the dims sweep (D 96 / 192),
#      bf16, flashkit (cuDNN in the first round; fp16 FA3 D 128 in the first round); on the first default build, fwd_dump.py compare against A's dumps
#      (RS-Q's outputs bitwise the default's: same products, same accumulation order). ~5-6 min.
#   C: test_backward_families_gpu.py's portable test, split by head dim in the forty-first session (it had timed out
#      at 420 s as one run), each head dim in its own pytest (TESTS_P at once), and the two D 64 m128 reference tests
#      (their reference times against session 41's, now with OMP_NUM_THREADS=2). ~3-4 min.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session42.sh A", timeout_s=600), then B, C the same way.
#   If (1)-(3) pass and the rows hold, set FLASHKIT_FWD_RS_Q's default to 1 (kernel_persistent.cuh).
set -u -o pipefail
PARTS=${1:?usage: session42.sh A|B|C}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s42
. "$(dirname "$0")/device_steps.sh"
save_insts fwd_sm90 "fwd_sm90_bf16_hd96 fwd_sm90_fp16_hd96 fwd_sm90_bf16_hd128 fwd_sm90_fp16_hd128 fwd_sm90_bf16_hd192 fwd_sm90_fp16_hd192"
DUMPS="$TREE/build/dumps"  # (ignored: a warm machine keeps it between calls; too large to bring back)
device_header
watchdog_start "${PACK_AT:-560}"
if [[ $PARTS == *A* ]]; then
  set_insts rsq "FLASHKIT_FWD_RS_Q 1"
  repeat_tests rsq "${REPS:-6}" "$TREE/tests/python/test_attention_gpu.py" "varlen_window_softcap or window_rows or softcap"
  step tests_rsq 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    step ${tool}_rsq 120 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims 96 128 192
  done
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  mkdir -p "$DUMPS"
  (cd /tmp && step dump_rsq 200 python3 "$TREE/scripts/dev/fwd_dump.py" save "$DUMPS/rsq.pt")
  (cd /tmp && FWD_DUMP_MODS=1 step dump_rsq_mods 200 python3 "$TREE/scripts/dev/fwd_dump.py" save "$DUMPS/rsq_mods.pt")
  pack
fi
if [[ $PARTS == *B* ]]; then
  for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
    for v in "base:" "rsq:FLASHKIT_FWD_RS_Q 1"; do
      n=${v%%:*}
      set_insts "$n$r" "${v#*:}"
      if [ "$n$r" = base1 ]; then  # (A's dumps: kept under the tree's build folder while the machine stays warm)
        if [ -f "$DUMPS/rsq.pt" ]; then
          (cd /tmp && step compare_dump 200 python3 "$TREE/scripts/dev/fwd_dump.py" compare "$DUMPS/rsq.pt")
          (cd /tmp && FWD_DUMP_MODS=1 step compare_dump_mods 200 python3 "$TREE/scripts/dev/fwd_dump.py" compare \
            "$DUMPS/rsq_mods.pt")
        else
          echo "no RS-Q dumps in $DUMPS (A ran on another machine): bitwise comparison skipped" | tee -a "$O/summary.txt"
        fi
      fi
      peers=""; [ "$r" = 1 ] && [ "$n" = base ] && peers=sdpa_cudnn
      (cd /tmp && step "bench_fa3_$n$r" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 \
        --impls flashkit $peers --out-dir "$O/bench" --tag "fa3-$n$r" --no-plot)
      (cd /tmp && step "bench_dims_$n$r" 150 python3 -m flashkit.bench --sweep dims \
        --impls flashkit $peers --out-dir "$O/bench" --tag "dims-$n$r" --no-plot)
      if [ "$r" = 1 ]; then  # (fp16: one round, the FA3 D 128 rows)
        (cd /tmp && step "bench_fp16_$n$r" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --dtype fp16 \
          --impls flashkit $peers --out-dir "$O/bench" --tag "fp16-$n$r" --no-plot)
      fi
    done
  done
  pack
fi
if [[ $PARTS == *C* ]]; then
  [[ $PARTS == *[AB]* ]] || { install_cmd "$TREE"; step install 400 "${INSTALL[@]}"; }
  restore_insts
  [[ $PARTS == *[AB]* ]] && { install_cmd "$TREE"; step install_default 400 "${INSTALL[@]}"; }
  # (+ one D 64 m128 test: its reference took 106-107 s of 153 s in session 41 with the default OpenMP threads, for
  # the OMP_NUM_THREADS=2 the file now sets)
  TESTS_P=${TESTS_P:-5} tests_each "$TREE/tests/python/test_backward_families_gpu.py" \
    "portable or d64_m128_kernel_matches_reference"
fi
restore_insts
pack
watchdog_stop; exit 0
