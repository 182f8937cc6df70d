#!/usr/bin/env bash
# Device calls of the thirty-sixth session (2026-11-28), H200.
#   P: ncu source counters + warp states of the split kernel (fp8 / int8 narrow and bf16, B 64 16k GQA 32/8, page 16):
#      where the 8-bit kernels' cycles go (issue 10's H200 gap), then
#   A: define variants of decode_q_bf16_hd128 (built incrementally into /tmp/pkg_<name>, pip --target): the quantized
#      tests on each, then graph times in interleaved rounds against the tree as installed.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session36.sh PA")
#   N: branch wip/decode-narrow16 carried as .carry/n16 (its session35.sh N16: tests, A/B, sanitizers).
#   F: the tree with FLASHKIT_DECODE_QFAST 3 / Q_NOSELECT 1 as defaults: decode + KV-cache GPU tests, sanitizers, then
#      graph times (bf16, int8, fp8; the issue-10 rows and two 16-row-form rows) against a build with both off
#      (int8, fp8), two interleaved rounds: the quantized table v12. VNAME / VDEF name another variant (defines) instead
#      of "off"; with VDEF set, the variant also gets the quantized tests and memcheck.
set -u -o pipefail
PARTS=${1:?usage: session36.sh PA|N}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s36
. "$(dirname "$0")/device_steps.sh"
pack() { tar -czf "${OUT:-/tmp}/s36.tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
NCU=/usr/local/cuda/bin/ncu
if [[ $PARTS == *P* || $PARTS == *A* || $PARTS == *F* ]]; then install_tree "$TREE"; pack; fi
if [[ $PARTS == *P* ]]; then
  for kv in ${PKV:-fp8 int8 bf16}; do
    (cd /tmp && step ncu_$kv 150 $NCU --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
      --metrics smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,dram__bytes_read.sum \
      -k regex:decode_split -s 3 -c 1 -f -o /tmp/rep_$kv python3 "$TREE/scripts/dev/decode_profile_case.py" \
      ${PCFG:-64:16384:32:8} $kv)
    $NCU -i /tmp/rep_$kv.ncu-rep --page details > "$O/details_$kv.txt" 2>&1
    $NCU -i /tmp/rep_$kv.ncu-rep --page source --csv --print-source sass > /tmp/src_$kv.csv 2>&1
    python3 "$TREE/scripts/dev/ncu_top_stalls.py" /tmp/src_$kv.csv > "$O/top_stalls_$kv.txt" 2>&1
    gzip -c /tmp/src_$kv.csv > "$O/src_$kv.csv.gz"
    pack
  done
fi
if [[ $PARTS == *A* ]]; then
  F="$TREE/src/kernels/decode/inst/decode_q_bf16_hd128.cu"
  # (first call: chains / nosel / both; QK chains measured +-1 %, dropped)
  inst_variants "$F" "${VARS:-"nosel=FLASHKIT_DECODE_Q_NOSELECT 1|fast1=FLASHKIT_DECODE_Q_NOSELECT 1;FLASHKIT_DECODE_QFAST 1|fast3=FLASHKIT_DECODE_Q_NOSELECT 1;FLASHKIT_DECODE_QFAST 3"}" 200
  names=(base "${VARIANT_NAMES[@]}")
  for n in "${names[@]:1}"; do
    (cd "$TREE/tests/python" && step tests_$n 200 env PYTHONPATH=/tmp/pkg_$n python3 -m pytest -q -x -n 6 \
      -p no:cacheprovider test_decode_gpu.py -k "quantized" -rA)
  done
  last=${names[-1]}
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  (cd /tmp && step memcheck_$last 100 env PYTHONPATH=/tmp/pkg_$last $S --tool memcheck --error-exitcode 1 python3 \
    "$TREE/scripts/sanitize_decode.py" --quick)
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  pack
  CF=${CF:-"16:8192:32:8 64:8192:32:8 128:4096:32:8 1:65536:32:8 16:16384:32:32 16:8192:64:8 64:16384:32:8"}
  for r in $(seq 1 ${ROUNDS:-3}); do
    for n in "${names[@]}"; do
      pp=""; [ "$n" != base ] && pp=/tmp/pkg_$n
      (cd /tmp && step bench_${n}_$r 100 env PYTHONPATH=$pp python3 "$TREE/scripts/decode_quick_bench.py" \
        --kv ${KVS:-int8 fp8} --configs $CF --csv "$O/bench_${n}_$r.csv")
    done
    pack
  done
fi
if [[ $PARTS == *F* ]]; then
  F="$TREE/src/kernels/decode/inst"
  mkdir -p "$O/inst.orig"
  VN=${VNAME:-off}
  for f in "$F"/decode_q_*.cu; do cp "$f" "$O/inst.orig/"; with_defines "$f" "${VDEF:-FLASHKIT_DECODE_QFAST 0;FLASHKIT_DECODE_Q_NOSELECT 0}" > "$f.tmp"; mv "$f.tmp" "$f"; done
  install_cmd "$TREE"
  step build_$VN 300 "${INSTALL[@]}" --target /tmp/pkg_$VN
  for f in "$O"/inst.orig/*.cu; do restore_inst "$f" "$F/$(basename "$f")"; done
  pack
  (cd "$TREE/tests/python" && step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
    test_decode_gpu.py test_kvcache_gpu.py)
  tail -2 "$O/tests.log"; pack
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  if [ -n "${VDEF:-}" ]; then
    (cd "$TREE/tests/python" && step tests_$VN 200 env PYTHONPATH=/tmp/pkg_$VN python3 -m pytest -q -n 6 \
      -p no:cacheprovider test_decode_gpu.py -k "quantized")
    (cd /tmp && step memcheck_$VN 100 env PYTHONPATH=/tmp/pkg_$VN $S --tool memcheck --error-exitcode 1 python3 \
      "$TREE/scripts/sanitize_decode.py" --quick)
    pack
  fi
  for tool in memcheck synccheck racecheck; do
    (cd /tmp && step $tool 100 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick)
    grep -h "Race reported" "$O/$tool.log" | grep -vc nvjet | sed "s/^/$tool hazards outside cuBLAS's nvjet: /" \
      | tee -a "$O/summary.txt"
    pack
  done
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
  CF=${CF:-"1:65536:32:8 1:16384:32:8 16:8192:32:8 16:16384:32:32 64:8192:32:8 64:16384:32:8 128:4096:32:8 128:8192:32:8 16:8192:64:4 64:8192:64:4"}
  for r in 1 2; do
    (cd /tmp && step bench_fast$r 150 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF \
      --csv "$O/fast$r.csv"); pack
    (cd /tmp && step bench_$VN$r 150 env PYTHONPATH=/tmp/pkg_$VN python3 "$TREE/scripts/decode_quick_bench.py" \
      --kv int8 fp8 --configs $CF --csv "$O/$VN$r.csv"); pack
  done
fi
if [[ $PARTS == *N* ]]; then
  (cd "$TREE/.carry/n16" && OUT=$O bash scripts/dev/session35.sh N16 > "$O/n16-driver.log" 2>&1)
  pack
fi
pack
