#!/usr/bin/env bash
# Device A/B of MLA compile-time switches on whole calls: each argument NAME=DEFINES (-D flags
# for every CUDA file, e.g. regs="-DFLASHKIT_MLA_STAGED_O=0"; empty = as committed) is built
# into its own build folder and installed, then the MLA sweep (BENCH_ARGS, default page 64,
# flashkit and FlashMLA from .carry/flashmla_built) runs; ROUNDS interleaved rounds.
#   run(carry=[".carry/flashmla_built"], command="bash scripts/dev/mla_define_ab.sh base= regs='-DFLASHKIT_MLA_STAGED_O=0'")
set -u -o pipefail
R=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/mdef
. "$R/scripts/dev/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
  for v in "$@"; do
    n=${v%%=*}; defs=${v#*=}
    (cd "$R" && step "install_$n$r" 420 python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$R/build/gpu_$n" \
      -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF \
      "-Ccmake.define.CMAKE_CUDA_FLAGS=$defs" "$R")
    (cd /tmp && step "bench_$n$r" 300 python3 -m flashkit.bench --op mla --flashmla-path "$R/.carry/flashmla_built" \
      --out-dir "$O/bench" --tag "$n$r" --no-plot ${BENCH_ARGS:---page-sizes 64})
    grep -E "geomean" "$O/bench_$n$r.log" | sed "s/^/$n$r: /" | tee -a "$O/summary.txt"
  done
done
tar -czf "${OUT:-/tmp}/mdef.tgz" -C "$(dirname "$O")" "$(basename "$O")"
