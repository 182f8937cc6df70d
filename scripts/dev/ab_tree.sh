#!/usr/bin/env bash
# Device A/B of two source trees in one machine session: OLD (e.g. `git archive HEAD` in
# .carry/old) then NEW (this tree): forward outputs compared bitwise (fwd_dump.py), the
# decode quick bench (bf16/int8/fp8, graph timing) and the FA3 forward sweep at D 128 (with
# cuDNN) on each; then on NEW the decode/forward GPU tests and the small sanitizer runs.
#   run(carry=[".carry/cur", ".carry/old"], command="bash .carry/cur/scripts/dev/ab_tree.sh .carry/old")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
OLD=$(cd "${1:?usage: ab_tree.sh OLD_TREE}" && pwd)
O=${OUT:-/tmp}/ab
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
CF=${DECODE_CONFIGS:-"1:65536:32:8 1:16384:32:8 16:8192:32:8 16:16384:32:32 64:8192:32:8 128:8192:32:8 16:4096:32:8 1:64:32:8"}
for side in old new; do
  T=$([ $side = old ] && echo "$OLD" || echo "$TREE")
  install_cmd "$T"
  (cd "$T" && step install_$side 420 "${INSTALL[@]}")
  cd /tmp
  if [ $side = old ]; then
    step dump_old 120 python3 "$TREE/scripts/dev/fwd_dump.py" save "$O/old.pt"
  else
    step compare_new 120 python3 "$TREE/scripts/dev/fwd_dump.py" compare "$O/old.pt"
  fi
  step decode_$side 240 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF --csv "$O/decode-$side.csv"
  step fwd_$side 200 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag $side --no-plot
done
step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py test_attention_gpu.py test_kernel_families_gpu.py test_index_hardening_gpu.py"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck_decode 120 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
step racecheck_decode 150 $S --tool racecheck --print-limit 30 python3 "$TREE/scripts/sanitize_decode.py" --quick
step memcheck_fwd 150 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
step racecheck_fwd 150 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
rm -f "$O"/*.pt
tar -czf "${OUT:-/tmp}/ab.tgz" -C "$(dirname "$O")" "$(basename "$O")"
