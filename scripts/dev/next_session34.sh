#!/usr/bin/env bash
# Device call prepared in the thirty-fourth session (2026-11-28) for the next one; NOT RUN yet.
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
set -u -o pipefail
PART=${1:?usage: next_session34.sh I}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ns34-$PART
. "$(dirname "$0")/device_steps.sh"
case $PART in
  I)
    ALT=/tmp/alt_ig
    rm -rf "$ALT" && mkdir -p "$ALT" && (cd "$TREE" && tar --exclude=./build --exclude=./.git -cf - .) | tar -xf - -C "$ALT"
    for f in "$TREE"/src/kernels/decode/inst/decode_*_hd*.cu; do
      with_defines "$f" "FLASHKIT_DECODE_IGNORE_SRC 1" > "$ALT/src/kernels/decode/inst/$(basename "$f")"
    done
    install_cmd "$ALT"
    ( step install_alt 400 "${INSTALL[@]}" --target /tmp/altpkg ) &
    alt_pid=$!
    install_tree "$TREE"
    wait $alt_pid
    for so in $(find /tmp/altpkg -name "*.so*" -path "*flashkit*"); do
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
    CF="16:8192:32:8 16:4096:32:8 64:8192:32:8 128:4096:32:8 16:16384:32:32 1:65536:32:8 1:16384:32:8"
    for r in 1 2; do
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
b = [load("base1"), load("base2")]; v = [load("ig1"), load("ig2")]
for k in b[0]:
    bb = min(x[k] for x in b); vv = min(x[k] for x in v)
    print(f"{k[0]:9s} B {k[1]:>3} S_k {k[2]:>6} {k[3]}/{k[4]}: base {bb:8.1f} us  ignore-src {vv:8.1f} us  {vv / bb - 1:+.1%}")
PY
    ;;
  *) echo "usage: $0 I" >&2; exit 2 ;;
esac
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/ns34-$PART.tgz" -C "$(dirname "$O")" "$(basename "$O")"
