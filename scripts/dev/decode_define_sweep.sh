#!/usr/bin/env bash
# Device run: variants of one decode instantiation file, each given as NAME=DEFINES
# (DEFINES: ';'-separated "MACRO VALUE" pairs prepended to the file as #defines; empty =
# as committed), rebuilt incrementally, checked by the quantized-cache tests, timed with
# scripts/decode_quick_bench.py (graph replay). Example:
#   INST=decode_q_bf16_hd128 bash scripts/dev/decode_define_sweep.sh "base=" "mb5=FLASHKIT_DECODE_QMINBLOCKS 5"
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/defs
. "$(dirname "$0")/device_steps.sh"
F="$TREE/src/kernels/decode/inst/${INST:-decode_q_bf16_hd128}.cu"
cp "$F" "$O/inst.orig"
CFGS=${CFGS:-"1:65536:32:8 1:16384:32:8 16:8192:32:8 16:4096:32:8 64:8192:32:8 128:4096:32:8"}
KV=${KV:-"bf16 fp8 int8"}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
for v in "$@"; do
  name=${v%%=*}; defs=${v#*=}
  with_defines "$O/inst.orig" "$defs" > "$F"
  install_cmd "$TREE"
  step build_$name 300 "${INSTALL[@]}" || continue
  (cd "$TREE/tests/python" && step tests_$name 200 python3 -m pytest -q -x -p no:cacheprovider test_decode_gpu.py -k "quantized or fused or many_splits")
  (cd /tmp && step bench_$name 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv $KV --configs $CFGS --csv "$O/bench-$name.csv")
  grep -v "^ *[0-9.]* us\|Warn\|warn" "$O/bench_$name.log" | sed "s/^/$name /" >> "$O/summary.txt"
done
restore_inst "$O/inst.orig" "$F"
tar -czf "${OUT:-/tmp}/defs.tgz" -C "$(dirname "$O")" "$(basename "$O")"
