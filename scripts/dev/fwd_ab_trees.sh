#!/usr/bin/env bash
# Device A/B of forward source trees in one machine session. Each argument NAME=TREE or
# NAME=TREE:DEFS (DEFS: ';'-separated "MACRO VALUE" pairs prepended to the instantiation
# files INSTS of a copy of TREE). Every variant is built once (its own build dir), then
# ROUNDS interleaved rounds re-install each and time the FA3 sweep at DIMS (bf16; cuDNN once,
# in the first variant's first round); the first round also compares the outputs of
# fwd_dump.py bitwise against the first variant. STEPS: "ab" (the above), "check" (forward
# and family GPU tests, memcheck / racecheck / synccheck of sanitize_small.py --quick on the
# LAST variant).
#   run(carry=[".carry/cur", ".carry/old"], command="bash .carry/cur/scripts/dev/fwd_ab_trees.sh old=.carry/old stsm0='.carry/cur:FLASHKIT_FWD_STSM_O 0' new=.carry/cur")
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp}/fwdab
. "$HERE/device_steps.sh"
INSTS=${INSTS:-"fwd_sm90_bf16_hd64 fwd_sm90_bf16_hd128"}
DIMS=${DIMS:-"64 128"}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-"ab check"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
NAMES=()
declare -A TREES
for v in "$@"; do
  n=${v%%=*}; spec=${v#*=}; t=${spec%%:*}; defs=""
  [[ "$spec" == *:* ]] && defs=${spec#*:}
  src=$(cd "$t" && pwd)
  if [ -n "$defs" ]; then  # a copy of the tree with the defines in its instantiation files
    dst=/tmp/fwdab-tree-$n
    rm -rf "$dst" && mkdir -p "$dst" && (cd "$src" && tar --exclude=./build -cf - .) | (cd "$dst" && tar -xf -)
    for f in $INSTS; do
      with_defines "$src/src/kernels/fwd_sm90/inst/$f.cu" "$defs" > "$dst/src/kernels/fwd_sm90/inst/$f.cu"
    done
    src=$dst
  fi
  NAMES+=("$n"); TREES[$n]=$src
  echo "$n: $src [$defs]" >> "$O/summary.txt"
done
inst() { install_cmd "${TREES[$1]}"; step "install_$1$2" 400 "${INSTALL[@]}"; }
DUMP=${TREES[${NAMES[0]}]}/scripts/dev/fwd_dump.py
if has ab; then
  for ((r = 1; r <= ROUNDS; r++)); do
    for n in "${NAMES[@]}"; do
      inst "$n" "$r"
      cd /tmp
      if [ "$r" = 1 ]; then
        if [ "$n" = "${NAMES[0]}" ]; then step "dump_$n" 150 python3 "$DUMP" save /tmp/fwdab-ref.pt
        else step "dump_$n" 150 python3 "$DUMP" compare /tmp/fwdab-ref.pt; fi
      fi
      impls="flashkit"
      [ "$r" = 1 ] && [ "$n" = "${NAMES[0]}" ] && impls="flashkit sdpa_cudnn"
      step "bench_$n$r" 200 python3 -m flashkit.bench --sweep fa3 --heads-dims $DIMS --impls $impls \
        --out-dir "$O/bench" --tag "$n$r" --no-plot
    done
  done
fi
if has check; then
  L=${NAMES[${#NAMES[@]}-1]}
  has ab || inst "$L" check
  T=${TREES[$L]}
  step "tests_$L" 300 bash -c "cd $T/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    step "${tool}_$L" 200 $S --tool $tool --error-exitcode 1 python3 "$T/scripts/sanitize_small.py" --quick
  done
fi
rm -f /tmp/fwdab-ref.pt
python3 - "$O/bench" <<'PY' | tee -a "$O/summary.txt"
import csv, glob, os, sys, collections
vals = collections.defaultdict(dict)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    tag = f.rsplit("-", 1)[-1][:-4]
    for r in csv.DictReader(open(f)):
        if r["impl"] in ("flashkit", "sdpa_cudnn") and r["mode"] == "fwd":
            name = tag if r["impl"] == "flashkit" else "cudnn"
            vals[(int(r["D"]), r["causal"], int(r["S_q"]))][name] = float(r["value"])
tags = sorted({t for v in vals.values() for t in v})
print("D causal S " + " ".join(tags))
for k in sorted(vals):
    print(*k, *[f"{vals[k].get(t, float('nan')):.1f}" for t in tags])
PY
tar -czf "${OUT:-/tmp}/fwdab.tgz" -C "$(dirname "$O")" "$(basename "$O")"
