#!/usr/bin/env bash
# Device run: the D 256 pair kernel's deterministic mode (FLASHKIT_BWD_KS_PAIR_DET=1; branch
# wip/pair-det): one dq turn per pair (BwdCta::dq_turn_pair), ascending without a mask (no rotated
# walk), descending under a right bound. Prediction: deterministic rows at S >= 4k +8..15% against
# the key-split kernel's deterministic mode (half the turns, half the adds per CTA, the pair's
# fast-mode gain), deterministic / fast from ~0.73 to >= 0.8 there; at S <= 2k without a mask the
# key-split kernel's rotated walk may stay ahead. Steps: build; the pair tests (the new
# deterministic one: reproducibility, dk / dv bitwise against the key-split kernel, sanitize_bwd.py
# --dims 256 with both switches); env A/B of the deterministic D 256 rows (two interleaved rounds);
# memcheck / racecheck / synccheck of the quick set with both switches. ~6 minutes.
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/pair_det.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/pairdet
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step install 400 "${INSTALL[@]}"
cd /tmp
step tests 400 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -p no:cacheprovider \
  test_backward_families_gpu.py -k pair"
for r in 1 2; do
  step "det_ks$r" 150 python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd \
    --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "det-ks$r" --no-plot
  step "det_pair$r" 150 env FLASHKIT_BWD_KS_PAIR_DET=1 python3 -m flashkit.bench --sweep fa3 --heads-dims 256 --mode bwd \
    --impls flashkit flashkit_deterministic --out-dir "$O/bench" --tag "det-pair$r" --no-plot
done
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 FLASHKIT_BWD_KS_PAIR=1 FLASHKIT_BWD_KS_PAIR_DET=1
for tool in memcheck racecheck synccheck; do
  step $tool 250 $S --tool $tool --error-exitcode 1 --print-limit 20 python3 "$TREE/scripts/sanitize_bwd.py" \
    --quick --dims 256 --dtypes bfloat16
done
tar -czf "${OUT:-/tmp}/pairdet.tgz" -C "$(dirname "$O")" "$(basename "$O")"
