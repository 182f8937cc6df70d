#!/usr/bin/env bash
# Device A/B: windows and softcaps at D 96-256 on the TMA kernels' kMods instantiations (the
# default since 2026-11-27) against the cp.async kernel's (FLASHKIT_FWD_MODS_CP_ASYNC=1), one
# build: fwd_dump.py's shapes with windows / softcaps (FWD_DUMP_MODS=1) compared bitwise, the
# window rows (causal window 4096 vs full causal, D 64/128/256, S 8k/16k, forward) in ROUNDS
# interleaved rounds, then the forward and family GPU tests and the three sanitizers.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/fwd_window_ab.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/fwdwin
. "$(dirname "$0")/device_steps.sh"
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-"install dump bench tests sanitize"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
install_cmd "$TREE"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
has install && step install 400 "${INSTALL[@]}"
cd /tmp
if has dump; then
  step dump_cp 150 env FWD_DUMP_MODS=1 FLASHKIT_FWD_MODS_CP_ASYNC=1 python3 "$TREE/scripts/dev/fwd_dump.py" save /tmp/mods.pt
  step dump_tma 150 env FWD_DUMP_MODS=1 python3 "$TREE/scripts/dev/fwd_dump.py" compare /tmp/mods.pt
fi
if has bench; then
  for ((r = 1; r <= ROUNDS; r++)); do
    for v in cp tma; do
      e=(env); [ $v = cp ] && e=(env FLASHKIT_FWD_MODS_CP_ASYNC=1)
      step "win_$v$r" 200 "${e[@]}" python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --causal yes \
        --seqlens 8192 16384 --window 4096 --impls flashkit --out-dir "$O/bench" --tag "win-$v$r" --no-plot
    done
  done
fi
if has tests; then
  step tests 300 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py"
fi
if has sanitize; then
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    step "$tool" 200 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick
  done
fi
rm -f /tmp/mods.pt
python3 - "$O/bench" <<'PY' | tee -a "$O/summary.txt"
import csv, glob, os, sys, collections
v = collections.defaultdict(dict)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    tag = f.rsplit("-", 1)[-1][:-4]
    for r in csv.DictReader(open(f)):
        v[(int(r["D"]), int(r["S_q"]))][f"{r['impl'].replace('flashkit_window4096', 'win')}-{tag}"] = float(r["value"])
for k in sorted(v):
    print(*k, " ".join(f"{n}={x:.1f}" for n, x in sorted(v[k].items())))
PY
tar -czf "${OUT:-/tmp}/fwdwin.tgz" -C "$(dirname "$O")" "$(basename "$O")"
