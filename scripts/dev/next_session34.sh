#!/usr/bin/env bash
# Device call prepared in the thirty-fourth session (2026-11-28) for the next one; both parts RUN in the thirty-fifth
# (decode.md "Where the split kernel's instructions go", "TMA page loads"). Part T needs branch wip/decode-tma now.
#   I (~5 min): the decode split kernels' K/V copies with the ignore-src predicate (split_kernel.cuh
#      FLASHKIT_DECODE_IGNORE_SRC, default 0; decode.md "Where the split kernel's instructions go"). The tree
#      installed as is (base) and a copy with "#define FLASHKIT_DECODE_IGNORE_SRC 1" prepended to every decode
#      instantiation file (variant, pip --target /tmp/altpkg, built at the same time). Then on the variant: the
#      decode and KV-cache GPU tests, memcheck / racecheck / synccheck of sanitize_decode.py --quick, the
#      LDGSTS-descriptor scan of its library; then graph times of both in two interleaved rounds (base, ig,
#      base, ig; bf16, int8 and fp8 caches) and ab ratios.
#   Prediction (SASS counts, CUDA 13.0): the bf16 D 128 loop 657 -> 575 instructions per warp and 64-token tile
#      (-12.5%; ncu: 35.5 M warp instructions at B 16 8k against cuDNN's 18.9 M), the 8-bit kernels -88 instructions
#      per kernel (their loop ~-10%). Time: bf16 B 16 0..-5%, the 8-bit kernels on the H200 -3..-8% (issue-bound
#      there); B >= 64 bf16 unchanged (at the read limit). If it holds, flip the default to 1 (the copy path of
#      the 8-bit scales, cp_async_4, could take the same form next).
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session34.sh I")
#   T (~9 min): the same for the TMA page loads (traits.cuh FLASHKIT_DECODE_TMA, decode.md "TMA page loads"; written
#      and compiled 2026-11-28 without a GPU: correctness first): three builds, base, tma (FLASHKIT_DECODE_TMA 1: the
#      16-bit caches) and tma2ig (FLASHKIT_DECODE_TMA 2: the 8-bit caches too, with FLASHKIT_DECODE_IGNORE_SRC 1);
#      the decode / KV-cache GPU tests and memcheck / racecheck / synccheck on each variant, the tma build with
#      FLASHKIT_DECODE_TMA=0 in the environment (its cp.async fallback) through the decode tests, then graph times
#      of the three in two interleaved rounds (bf16, int8 and fp8 caches).
#   Prediction for tma: the bf16 D 128 loop from ~650 to ~400 instructions per warp and tile (the 16 copies per
#      thread become 8 boxes per warp from one lane); bf16 B 16 GQA -3..-8% (toward cuDNN), B >= 64 at most -2%
#      (read limit), B 1 unchanged or slightly better. tma2ig: the 8-bit kernels at D 128 (4 CTAs per SM kept by
#      the launch bound, 12-16 bytes of spills) +5..+25% speed on the H200 if their loop is issue-bound as measured.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session34.sh T")
set -u -o pipefail
PART=${1:?usage: next_session34.sh I|T}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ns34-$PART
. "$(dirname "$0")/device_steps.sh"
case $PART in
  I)
    DECODE_INSTS=$(cd "$TREE/src/kernels/decode/inst" && ls decode_*_hd*.cu | sed 's/\.cu$//' | tr '\n' ' ')
    ( VARIANT_INST_DIR=decode/inst define_variant "$TREE" /tmp/alt_ig "FLASHKIT_DECODE_IGNORE_SRC 1" "$DECODE_INSTS" \
      /tmp/altpkg ) &
    alt_pid=$!
    install_tree "$TREE"
    wait $alt_pid
    for so in $(find /tmp/altpkg -name "libflashkit*.so*"); do
      step "ldgsts_scan_$(basename "$so")" 120 bash "$TREE/scripts/check_ldgsts_desc.sh" "$so"
    done
    (cd "$TREE/tests/python" && step tests_ig 300 env PYTHONPATH=/tmp/altpkg python3 -m pytest -q -m gpu -n 6 \
      -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py)
    tail -2 "$O/tests_ig.log"
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    for tool in memcheck racecheck synccheck; do
      (cd /tmp && step ${tool}_ig 200 env PYTHONPATH=/tmp/altpkg $S --tool $tool --error-exitcode 1 \
        python3 "$TREE/scripts/sanitize_decode.py" --quick)
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    CF="16:8192:32:8 16:4096:32:8 64:8192:32:8 128:4096:32:8 16:16384:32:32 1:65536:32:8 1:16384:32:8 16:8192:64:8"
    for r in 1 2 3; do
      (cd /tmp && step bench_base$r 200 python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 --configs $CF \
        --csv "$O/base$r.csv")
      (cd /tmp && step bench_ig$r 200 env PYTHONPATH=/tmp/altpkg python3 "$TREE/scripts/decode_quick_bench.py" \
        --kv bf16 int8 fp8 --configs $CF --csv "$O/ig$r.csv")
    done
    python3 - "$O" <<'PY' | tee "$O/ab.txt"
import csv, sys
o = sys.argv[1]
def load(n):
    return {(r["dtype"], r["B"], r["S_k"], r["H_q"], r["H_kv"]): float(r["value"])
            for r in csv.DictReader(open(f"{o}/{n}.csv")) if r["unit"] == "us"}
b = [load(f"base{i}") for i in (1, 2, 3)]; v = [load(f"ig{i}") for i in (1, 2, 3)]
for k in b[0]:
    bb = min(x[k] for x in b); vv = min(x[k] for x in v)
    print(f"{k[0]:9s} B {k[1]:>3} S_k {k[2]:>6} {k[3]}/{k[4]}: base {bb:8.1f} us  ignore-src {vv:8.1f} us  {vv / bb - 1:+.1%}")
PY
    ;;
  T)
    DECODE_INSTS=$(cd "$TREE/src/kernels/decode/inst" && ls decode_*_hd*.cu | sed 's/\.cu$//' | tr '\n' ' ')
    export VARIANT_INST_DIR=decode/inst
    ( define_variant "$TREE" /tmp/alt_tma "FLASHKIT_DECODE_TMA 1" "$DECODE_INSTS" /tmp/pkg_tma ) &
    p1=$!
    ( define_variant "$TREE" /tmp/alt_tma2ig "FLASHKIT_DECODE_TMA 2;FLASHKIT_DECODE_IGNORE_SRC 1" "$DECODE_INSTS" \
      /tmp/pkg_tma2ig ) &
    p2=$!
    install_tree "$TREE"
    wait $p1 $p2
    for v in tma tma2ig; do
      for so in $(find /tmp/pkg_$v -name "libflashkit*.so*"); do
        step "ldgsts_${v}_$(basename "$so")" 120 bash "$TREE/scripts/check_ldgsts_desc.sh" "$so"
      done
      (cd "$TREE/tests/python" && step tests_$v 300 env PYTHONPATH=/tmp/pkg_$v python3 -m pytest -q -m gpu -n 6 \
        -p no:cacheprovider test_decode_gpu.py test_kvcache_gpu.py)
      tail -2 "$O/tests_$v.log"
      export PYTORCH_NO_CUDA_MEMORY_CACHING=1
      for tool in memcheck racecheck synccheck; do
        (cd /tmp && step ${tool}_$v 200 env PYTHONPATH=/tmp/pkg_$v $S --tool $tool --error-exitcode 1 \
          python3 "$TREE/scripts/sanitize_decode.py" --quick)
      done
      unset PYTORCH_NO_CUDA_MEMORY_CACHING
    done
    (cd "$TREE/tests/python" && step tests_tma_envoff 300 env PYTHONPATH=/tmp/pkg_tma FLASHKIT_DECODE_TMA=0 \
      python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_decode_gpu.py)
    CF="16:8192:32:8 16:4096:32:8 64:8192:32:8 128:4096:32:8 16:16384:32:32 1:65536:32:8 1:16384:32:8 16:8192:64:8"
    for r in 1 2; do
      for v in base tma tma2ig; do
        pp=""; [ $v != base ] && pp="PYTHONPATH=/tmp/pkg_$v"
        (cd /tmp && step bench_$v$r 200 env $pp python3 "$TREE/scripts/decode_quick_bench.py" --kv bf16 int8 fp8 \
          --configs $CF --page 16 64 --csv "$O/$v$r.csv")
      done
    done
    python3 - "$O" <<'PY' | tee "$O/ab.txt"
import csv, sys
o = sys.argv[1]
def load(n):
    return {(r["dtype"], r["B"], r["S_k"], r["H_q"], r["H_kv"], r["page_size"]): float(r["value"])
            for r in csv.DictReader(open(f"{o}/{n}.csv")) if r["unit"] == "us"}
runs = {v: [load(f"{v}1"), load(f"{v}2")] for v in ("base", "tma", "tma2ig")}
for k in runs["base"][0]:
    b = min(x[k] for x in runs["base"])
    line = f"{k[0]} B {k[1]:>3} S_k {k[2]:>6} {k[3]}/{k[4]} page {k[5]:>3}: base {b:8.1f} us"
    for v in ("tma", "tma2ig"):
        t = min(x[k] for x in runs[v])
        line += f"  {v} {t:8.1f} ({t / b - 1:+.1%})"
    print(line)
PY
    ;;
  *) echo "usage: $0 I|T" >&2; exit 2 ;;
esac
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/ns34-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
