#!/usr/bin/env bash
# Device A/B of the MLA FP8 path between two trees (.carry/old and this one): each tree built once in its
# own build dir and reinstalled by pip, interleaved new, old, new, old; timing by scripts/dev/mla_fp8_probe.py
# (CONFIGS, default the four b 128 8k rows); the FP8 tests first, then (ABLATE=1, default) each tree with
# nothing converted (FLASHKIT_MLA_FP8_ABLATE=1), and compute-sanitizer's memcheck / racecheck / synccheck of
# the page-64 FP8 case last, on the new tree.
#   git worktree add /tmp/old <rev>; rsync the two trees (no build/, no .git) to .carry/old and .carry/cur, then
#   run(carry=[".carry/cur", ".carry/old"], command="bash .carry/cur/scripts/dev/mla_fp8_ab_trees.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
OLD=$(cd "$TREE/../old" && pwd)
O=${OUT:-/tmp}/fp8ab
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
cd /tmp
C=${CONFIGS:-"16 1 8192;16 2 8192;128 1 8192;128 2 8192"}
P() { step "$1" 100 python3 "$TREE/scripts/dev/mla_fp8_probe.py" "$C" ${2:-}; }
install_cmd "$OLD"; I_OLD=("${INSTALL[@]}")
install_cmd "$TREE"; I_NEW=("${INSTALL[@]}")
step install_new 400 "${I_NEW[@]}"
step fp8_tests 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider "$TREE/tests/python/test_mla_fp8_gpu.py"
P new1
step install_old 400 "${I_OLD[@]}"
P old1 --fp8-only
step install_new2 300 "${I_NEW[@]}"
P new2 --fp8-only
step install_old2 300 "${I_OLD[@]}"
P old2 --fp8-only
if [ "${ABLATE:-1}" = 1 ]; then  # nothing converted (FLASHKIT_MLA_FP8_ABLATE=1): the structure's own time, both trees
  step old_ablate 100 env FLASHKIT_MLA_FP8_ABLATE=1 python3 "$TREE/scripts/dev/mla_fp8_probe.py" "$C" --fp8-only
fi
step install_new3 300 "${I_NEW[@]}"
[ "${ABLATE:-1}" = 1 ] && step new_ablate 100 env FLASHKIT_MLA_FP8_ABLATE=1 python3 "$TREE/scripts/dev/mla_fp8_probe.py" "$C" --fp8-only
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck synccheck; do
  step $tool 200 $S --tool $tool --error-exitcode 1 --print-limit 30 python3 "$TREE/scripts/sanitize_mla.py" --quick --only page64
done
cat "$O/summary.txt"
for f in new1 old1 new2 old2 old_ablate new_ablate; do [ -f "$O/$f.log" ] && { echo "== $f"; cat "$O/$f.log"; }; done
