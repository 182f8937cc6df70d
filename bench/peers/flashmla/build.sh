#!/usr/bin/env bash
# Prepare the FlashMLA peer of the FlashKit MLA bench (python -m flashkit.bench --op mla).
#
#   bench/peers/flashmla/build.sh sources [OUT_DIR]   (default OUT_DIR: <repo>/.carry/flashmla)
#       Lay out FlashMLA's sources (deepseek-ai/FlashMLA at 9edee0c, the 2025-04 version the
#       SPEC's anchor was measured with) and CUTLASS's headers (NVIDIA/cutlass at e94e888,
#       FlashMLA's submodule; include/ only, at csrc/cutlass/include, trimmed of the folders
#       FlashMLA never includes) into OUT_DIR: ~15 MB, to be carried to the GPU machine.
#       Needs git clones (or mirrors) of both repositories: FLASHMLA_GIT and CUTLASS_GIT
#       (default: /work/.mirror/deepseek-ai+FlashMLA/repo and /work/.mirror/NVIDIA+cutlass/repo).
#
#   bench/peers/flashmla/build.sh compile [SRC_DIR]      (on the GPU machine)
#       python3 setup.py build_ext --inplace in SRC_DIR (default: ./.carry/flashmla): FlashMLA's
#       own setup.py, sm_90a only (it names no other target), ~2 min with MAX_JOBS=4
#       NVCC_THREADS=4. Then SRC_DIR/flash_mla_cuda*.so + SRC_DIR/flash_mla/ are the package.
#
#   bench/peers/flashmla/build.sh pack SRC_DIR DEST_DIR
#       Copy the built extension and the flash_mla/ package into DEST_DIR (the prebuilt peer
#       that later runs carry instead of the sources: ~1-2 MB, no rebuild).
#
# device_build_and_bench.sh (beside this file) does compile + pack + checks + the sweep in one
# GPU-machine call; README.md says how the carry folders were made and checked.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
FLASHMLA_COMMIT=9edee0c
CUTLASS_COMMIT=e94e888
# CUTLASS folders no FlashMLA source reaches (checked: its three .cu files compile for sm_90a
# against the trimmed tree, and nvcc -M lists no header under them)
CUTLASS_DROP=(conv experimental epilogue gemm reduction transform)

cmd="${1:-}"
case "$cmd" in
  sources)
    OUT="${2:-$REPO/.carry/flashmla}"
    FM_GIT="${FLASHMLA_GIT:-/work/.mirror/deepseek-ai+FlashMLA/repo}"
    CU_GIT="${CUTLASS_GIT:-/work/.mirror/NVIDIA+cutlass/repo}"
    if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
      echo "$OUT exists and is not empty; remove it first" >&2; exit 1
    fi
    mkdir -p "$OUT/csrc/cutlass"
    git -C "$FM_GIT" archive "$FLASHMLA_COMMIT" | tar -x -C "$OUT"
    git -C "$CU_GIT" archive "$CUTLASS_COMMIT" include | tar -x -C "$OUT/csrc/cutlass"
    for d in "${CUTLASS_DROP[@]}"; do rm -rf "$OUT/csrc/cutlass/include/cutlass/$d"; done
    {
      echo "FlashMLA $(git -C "$FM_GIT" rev-parse "$FLASHMLA_COMMIT") (deepseek-ai/FlashMLA)"
      echo "CUTLASS  $(git -C "$CU_GIT" rev-parse "$CUTLASS_COMMIT") (NVIDIA/cutlass), include/ only,"
      echo "         without include/cutlass/{$(IFS=,; echo "${CUTLASS_DROP[*]}")}"
      echo "made by FlashKit bench/peers/flashmla/build.sh sources on $(date -u +%F)"
    } > "$OUT/SOURCES.txt"
    du -sh "$OUT"
    ;;
  compile)
    SRC="${2:-./.carry/flashmla}"
    export CPLUS_INCLUDE_PATH="${CPLUS_INCLUDE_PATH:-/usr/local/cuda/include/cccl}"
    export MAX_JOBS="${MAX_JOBS:-4}" NVCC_THREADS="${NVCC_THREADS:-4}"
    cd "$SRC" && python3 setup.py build_ext --inplace
    ls -la flash_mla_cuda*.so
    ;;
  pack)
    SRC="${2:?SRC_DIR}"; DEST="${3:?DEST_DIR}"
    mkdir -p "$DEST"
    cp -r "$SRC"/flash_mla "$SRC"/flash_mla_cuda*.so "$DEST"/
    rm -rf "$DEST/flash_mla/__pycache__"
    [ -f "$SRC/SOURCES.txt" ] && cp "$SRC/SOURCES.txt" "$DEST/"
    cp "$SRC/LICENSE" "$DEST/LICENSE.FlashMLA" 2>/dev/null || true
    du -sh "$DEST"
    ;;
  *)
    sed -n '2,25p' "$0"; exit 2 ;;
esac
