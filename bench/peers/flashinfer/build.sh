#!/usr/bin/env bash
# Build the FlashInfer peer of the FlashKit decode bench: three small shared libraries with
# FlashInfer's paged decode / prefill kernels compiled AHEAD OF TIME for sm_90a, so that the
# GPU machine (no internet, no FlashInfer Python stack) compiles nothing.
#
#   bench/peers/flashinfer/build.sh [OUT_DIR]        (default: <repo>/.carry/flashinfer)
#
# Inputs: the flashinfer-python 0.7.2.post1 wheel from PyPI (sha256 pinned below; downloaded
# with pip if FI_WHEEL is not set), nvcc (CUDA 13.0 was used), python3 with jinja2 (installed
# into a scratch folder with pip if missing). Only the wheel's headers and templates are used:
# flashinfer/data/{include,csrc,cccl,cutlass} (the same include set FlashInfer's JIT uses).
#
# Output in OUT_DIR: libfi_decode.so, libfi_fa2.so, libfi_fa3.so (sm_90a only), BUILD_INFO.txt,
# README.md, validate_fi.py + fi_peer.py (standalone GPU check), and src/ (this folder's
# sources, so the carry folder documents and rebuilds itself: src/build.sh needs the repo
# layout, i.e. run it from a FlashKit checkout's bench/peers/flashinfer).
# Time: ~15-25 min on 2 cores (FA3 dominates); FI_JOBS (default 2) parallel nvcc jobs.
# FI_SKIP_FA3=1 leaves out the FA3 (sm90 prefill) library.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
if [ -f "$REPO/python/flashkit/bench/fi_peer.py" ]; then
  DEFAULT_OUT="$REPO/.carry/flashinfer"; FI_PEER_PY="$REPO/python/flashkit/bench/fi_peer.py"
else  # running the copy in a carry folder's src/: rebuild that folder
  DEFAULT_OUT="$HERE/.."; FI_PEER_PY="$HERE/../fi_peer.py"
fi
OUT="$(mkdir -p "${1:-$DEFAULT_OUT}" && cd "${1:-$DEFAULT_OUT}" && pwd)"
WORK="${FI_WORK:-${TMPDIR:-/tmp}/fi_peer_build}"
JOBS="${FI_JOBS:-2}"
PY="${PYTHON:-python3}"
NVCC="${NVCC:-nvcc}"
FI_VERSION=0.7.2.post1
FI_SHA256=bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49
ARCH="-gencode=arch=compute_90a,code=sm_90a"

mkdir -p "$WORK"
echo "work dir: $WORK   out dir: $OUT"

# 1. the wheel --------------------------------------------------------------------------
WHEEL="${FI_WHEEL:-}"
if [ -z "$WHEEL" ]; then
  WHEEL="$WORK/flashinfer_python-$FI_VERSION-py3-none-any.whl"
  if [ ! -f "$WHEEL" ]; then
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
      -d "$WORK" "flashinfer-python==$FI_VERSION"
  fi
fi
echo "$FI_SHA256  $WHEEL" | sha256sum -c -
if [ ! -f "$WORK/pkg/.unpacked" ]; then
  rm -rf "$WORK/pkg" && mkdir -p "$WORK/pkg"
  (cd "$WORK/pkg" && unzip -q "$WHEEL" 'flashinfer/data/include/*' 'flashinfer/data/csrc/*' \
      'flashinfer/data/cccl/*' 'flashinfer/data/cutlass/include/*' \
      'flashinfer/data/cutlass/tools/util/include/*' && touch .unpacked)
fi
DATA="$WORK/pkg/flashinfer/data"

# 2. render FlashInfer's JIT templates ----------------------------------------------------
if ! "$PY" -c 'import jinja2' 2>/dev/null; then
  "$PY" -m pip install -q --target "$WORK/pydeps" 'jinja2==3.1.6'
  export PYTHONPATH="$WORK/pydeps${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PY" "$HERE/render_templates.py" "$WORK/pkg/flashinfer" "$WORK/gen"

# 3. compile (the flags FlashInfer's JIT uses: jit/core.py gen_jit_spec, jit/cpp_ext.py) --
INCS=(-I"$DATA/cccl/cub" -I"$DATA/cccl/libcudacxx/include" -I"$DATA/cccl/thrust"
      -isystem "$DATA/include" -isystem "$DATA/csrc"
      -isystem "$DATA/cutlass/include" -isystem "$DATA/cutlass/tools/util/include"
      -I"$HERE")
FLAGS=(-std=c++17 -O3 "$ARCH" -use_fast_math -Xfatbin=-compress-all --compress-mode=size
       -DFLASHINFER_ENABLE_F16 -DFLASHINFER_ENABLE_BF16 -DFLASHINFER_ENABLE_FP8_E4M3
       -DFLASHINFER_ENABLE_FP8_E5M2 -DFLASHINFER_ENABLE_FP8_E8M0 -DFLASHINFER_ENABLE_FP4_E2M1
       --expt-relaxed-constexpr -static-global-template-stub=false
       --compiler-options=-fPIC,-fvisibility=hidden -Xcompiler=-Wno-switch-bool)
FA3_FLAGS=(-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED)

# name | sources (relative to gen dir or HERE) | extra flags
declare -A SRCS=(
  [decode]="$WORK/gen/decode/batch_decode_kernel.cu $HERE/fi_peer_decode.cu"
  [fa2]="$WORK/gen/fa2/batch_prefill_paged_kernel_mask_0.cu $WORK/gen/fa2/batch_prefill_paged_kernel_mask_1.cu $HERE/fi_peer_fa2.cu"
  [fa3]="$WORK/gen/fa3/batch_prefill_paged_sm90_kernel_mask_0.cu $WORK/gen/fa3/batch_prefill_paged_sm90_kernel_mask_1.cu $HERE/fi_peer_fa3.cu"
)
LIBS=(decode fa2)
[ "${FI_SKIP_FA3:-0}" = "1" ] || LIBS+=(fa3)

mkdir -p "$WORK/obj"
jobs_file="$WORK/obj/jobs.txt"; : >"$jobs_file"
for lib in "${LIBS[@]}"; do
  for src in ${SRCS[$lib]}; do
    obj="$WORK/obj/$lib-$(basename "$src" .cu).o"
    extra=""; [ "$lib" = fa3 ] && extra="${FA3_FLAGS[*]}"
    # each library's generated config header sits next to its kernel files
    printf '%s\n' "$NVCC ${FLAGS[*]} $extra ${INCS[*]} -I$WORK/gen/$lib -c $src -o $obj" >>"$jobs_file"
  done
done
echo "compiling $(wc -l <"$jobs_file") translation units with $JOBS jobs ..."
start=$(date +%s)
# shellcheck disable=SC2016
xargs -P "$JOBS" -I{} -d '\n' bash -c 'echo "+ ${1##* -c }"; eval "$1" || exit 255' _ {} <"$jobs_file"
for lib in "${LIBS[@]}"; do
  objs=()
  for src in ${SRCS[$lib]}; do objs+=("$WORK/obj/$lib-$(basename "$src" .cu).o"); done
  "$NVCC" "$ARCH" -shared -o "$OUT/libfi_$lib.so" "${objs[@]}" -Xlinker=--no-undefined,-s
  echo "linked $OUT/libfi_$lib.so ($(du -h "$OUT/libfi_$lib.so" | cut -f1))"
done
echo "compile time: $(( $(date +%s) - start )) s"

# 4. record how it was made, and carry the sources ----------------------------------------
mkdir -p "$OUT/src"
if [ "$(realpath "$HERE")" != "$(realpath "$OUT/src")" ]; then
  cp "$HERE"/{build.sh,render_templates.py,fi_peer_common.h,fi_peer_decode.cu,fi_peer_fa2.cu,fi_peer_fa3.cu,validate_fi.py,README.md} "$OUT/src/"
fi
cp "$HERE/README.md" "$HERE/validate_fi.py" "$OUT/"
[ "$(realpath "$FI_PEER_PY")" = "$(realpath -m "$OUT/fi_peer.py")" ] || cp "$FI_PEER_PY" "$OUT/"  # loader for validate_fi.py
{
  echo "flashinfer-python $FI_VERSION (PyPI wheel sha256 $FI_SHA256)"
  echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -srm), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "nvcc: $("$NVCC" --version | tail -1)"
  echo "arch: $ARCH"
  echo "flags: ${FLAGS[*]}"
  echo "libs: ${LIBS[*]}"
  for lib in "${LIBS[@]}"; do echo "  libfi_$lib.so sha256 $(sha256sum "$OUT/libfi_$lib.so" | cut -d' ' -f1)"; done
} >"$OUT/BUILD_INFO.txt"
cat "$OUT/BUILD_INFO.txt"
