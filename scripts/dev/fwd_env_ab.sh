#!/usr/bin/env bash
# Device A/B of forward switches: install the tree once, smoke check (fwd_smoke.py), then
# each argument NAME=ENV (space-separated VAR=VALUE pairs in one argument; empty = defaults) timed on
# the FA3 sweep (BENCH_ARGS, e.g. "--heads-dims 128 96 --causal yes") in ROUNDS interleaved rounds,
# PEERS (default sdpa_cudnn) in the first; ab.txt: each variant's rows over the first's (ab_ratios.py). Then (CHECKS=1)
# the forward and family GPU tests and memcheck / racecheck / synccheck of sanitize_small.py --quick
# --dims $DIMS (TEST_K: a pytest -k filter for the tests).
# ALT_DEFINES ("MACRO VALUE" pairs, ';'-separated) and ALT_INSTS (fwd_sm90 instantiation file names):
# a second package built at the same time from a copy of the tree with those defines prepended to
# those files, installed in /tmp/altpkg: a variant with PYTHONPATH=/tmp/altpkg runs it.
#   run(command="BENCH_ARGS='--heads-dims 128' bash scripts/dev/fwd_env_ab.sh base= off='FLASHKIT_FWD_TMA_STORE=0'")
#   run(command="ALT_DEFINES='FLASHKIT_FWD_STSM_O 0' ALT_INSTS='fwd_sm90_bf16_hd128 fwd_sm90_fp16_hd128' \
#       BENCH_ARGS='--heads-dims 128' bash scripts/dev/fwd_env_ab.sh on= off=PYTHONPATH=/tmp/altpkg")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/envab
. "$(dirname "$0")/device_steps.sh"
if [ -n "${ALT_DEFINES:-}" ]; then
  define_variant "$TREE" /tmp/alt "$ALT_DEFINES" "${ALT_INSTS:?}" /tmp/altpkg &
  alt_pid=$!
fi
install_tree "$TREE"
if [ -n "${ALT_DEFINES:-}" ]; then wait $alt_pid; fi
(cd /tmp && step smoke 180 python3 "$TREE/scripts/dev/fwd_smoke.py")
grep -v "^ok" "$O/smoke.log" | tail -20
if ! grep -q "all ok" "$O/smoke.log"; then cat "$O/summary.txt"; exit 1; fi
for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
  first=1
  for v in "$@"; do
    name=${v%%=*}; envs=${v#*=}
    impls=flashkit
    [ "$r" = 1 ] && [ "$first" = 1 ] && [ -n "${PEERS-sdpa_cudnn}" ] && impls="flashkit ${PEERS-sdpa_cudnn}"
    first=0
    (cd /tmp && step "bench_$name$r" 250 env $envs python3 -m flashkit.bench --sweep fa3 ${BENCH_ARGS:-} \
      --impls $impls --out-dir "$O/bench" --tag "$name$r" --no-plot)
  done
done
names=(); for v in "$@"; do names+=("${v%%=*}"); done
python3 "$TREE/scripts/dev/ab_ratios.py" "$O/bench" "${names[@]}" | tee "$O/ab.txt"
if [ "${CHECKS:-1}" = 1 ]; then
  step tests 330 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider ${TEST_K:+-k \"$TEST_K\"} test_attention_gpu.py test_kernel_families_gpu.py"
  tail -3 "$O/tests.log"
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  for tool in memcheck racecheck synccheck; do
    step $tool 150 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims ${DIMS:-96 128}
  done
fi
cat "$O/summary.txt"
