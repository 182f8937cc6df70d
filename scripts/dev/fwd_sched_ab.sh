#!/usr/bin/env bash
# Device A/B of the forward's scheduling groups (src/launch/fwd_sched.h, FLASHKIT_FWD_SCHED_GROUP):
# install, smoke check with the new order (D 64-256), outputs bitwise equal to the old order's
# (fwd_dump.py), ncu DRAM bytes at D 128 S 512 causal per arm, then the causal FA3 sweep (D 64 /
# 128 / 256) and the causal dims sweep (D 96 / 192) per arm in ROUNDS interleaved rounds, cuDNN in the
# first arm of round 1; ab.txt = ab_ratios.py over the first arm.
#   run(command="bash scripts/dev/fwd_sched_ab.sh base= old=FLASHKIT_FWD_SCHED_GROUP=l2 q4=FLASHKIT_FWD_SCHED_GROUP=l2/4")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/sched
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
(cd /tmp && FWD_SMOKE_DIMS="64 96 128 192 256" step smoke 200 python3 "$TREE/scripts/dev/fwd_smoke.py")
grep -v "^ok" "$O/smoke.log" | tail -5
(cd /tmp && FLASHKIT_FWD_SCHED_GROUP=l2 step dump_old 120 python3 "$TREE/scripts/dev/fwd_dump.py" save /tmp/old.pt)
(cd /tmp && step dump_cmp 120 python3 "$TREE/scripts/dev/fwd_dump.py" compare /tmp/old.pt)
tail -3 "$O/dump_cmp.log"
cat > /tmp/case512.py <<'PY'
import torch, flashkit
S, D = 512, 128
q, k, v = (torch.randn(16384 // S, S, 2048 // D, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    flashkit.attention(q, k, v, causal=True)
torch.cuda.synchronize()
PY
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum
for v in "$@"; do
  name=${v%%=*}; envs=${v#*=}
  echo "== $name" >> "$O/ncu.txt"
  (cd /tmp && env $envs timeout 90 /usr/local/cuda/bin/ncu --metrics $M -k regex:fwd_kernel -s 2 -c 1 python3 /tmp/case512.py 2>&1 \
    | grep -E "^ +[a-z_]+__" >> "$O/ncu.txt")
done
cat "$O/ncu.txt"
for ((r = 1; r <= ${ROUNDS:-2}; r++)); do
  first=1
  for v in "$@"; do
    name=${v%%=*}; envs=${v#*=}
    impls=flashkit
    [ "$r" = 1 ] && [ "$first" = 1 ] && impls="flashkit sdpa_cudnn"
    first=0
    (cd /tmp && step "fa3_$name$r" 200 env $envs python3 -m flashkit.bench --sweep fa3 --causal yes \
      --impls $impls --out-dir "$O/bench" --tag "fa3-$name$r" --no-plot)
    (cd /tmp && step "dims_$name$r" 200 env $envs python3 -m flashkit.bench --sweep dims --causal yes \
      --impls $impls --out-dir "$O/bench" --tag "dims-$name$r" --no-plot)
  done
done
names=(); for v in "$@"; do names+=("${v%%=*}"); done
python3 "$TREE/scripts/dev/ab_ratios.py" "$O/bench" "${names[@]}" | tee "$O/ab.txt"
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/sched.tgz" -C "$(dirname "$O")" "$(basename "$O")"
