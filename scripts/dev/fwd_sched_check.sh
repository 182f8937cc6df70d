#!/usr/bin/env bash
# Device check of the forward's head-major causal order (fwd_sched.h): the causal 16k rows with the
# persistent kernel forced (FLASHKIT_FWD_PERSISTENT=1: the walk is head-major now; until 2026-11-28
# causal calls of more than 64 row blocks took the grid kernel) against the default, two rounds; then the
# forward and family GPU tests and memcheck / racecheck / synccheck of sanitize_small.py --quick.
#   run(command="bash scripts/dev/fwd_sched_check.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/check
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
for r in 1 2; do
  for v in base= pers=FLASHKIT_FWD_PERSISTENT=1; do
    name=${v%%=*}; envs=${v#*=}
    (cd /tmp && step "fa3_$name$r" 120 env $envs python3 -m flashkit.bench --sweep fa3 --causal yes --seqlens 8k 16k \
      --heads-dims 64 128 --impls flashkit --out-dir "$O/bench" --tag "fa3-$name$r" --no-plot)
    (cd /tmp && step "dims_$name$r" 120 env $envs python3 -m flashkit.bench --sweep dims --causal yes --seqlens 8k 16k \
      --impls flashkit --out-dir "$O/bench" --tag "dims-$name$r" --no-plot)
  done
done
python3 "$TREE/scripts/dev/ab_ratios.py" "$O/bench" base pers | tee "$O/ab.txt"
step tests 330 bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider test_attention_gpu.py test_kernel_families_gpu.py"
tail -3 "$O/tests.log"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in memcheck racecheck synccheck; do
  step $tool 150 $S --tool $tool --error-exitcode 1 python3 "$TREE/scripts/sanitize_small.py" --quick --dims 64 96 128 192 256
done
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/check.tgz" -C "$(dirname "$O")" "$(basename "$O")"
