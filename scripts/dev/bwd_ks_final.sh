#!/usr/bin/env bash
# The 2026-11-27 device call for the key-split D 256 backward: the stats A/B (bwd_define_ab.sh),
# the backward results file with the peers (tag bwd-v7), sanitize_bwd.py at D 256 and memcheck /
# racecheck. The tree carries its commit in COMMIT (the device's .git is stale).
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/bwd_ks_final.sh")
set -u
T=.carry/cur
ROUNDS=2 bash $T/scripts/dev/bwd_define_ab.sh sync='FLASHKIT_BWD_KS_STATS_ASYNC 0' async= > /dev/null 2>&1
cat $OUT/bwddef/summary.txt
O=$OUT/fin; mkdir -p $O/bench; . $T/scripts/dev/device_steps.sh
cd /tmp
export FLASHKIT_COMMIT=$(cat $OLDPWD/$T/COMMIT)
step bwd 450 python3 -m flashkit.bench --sweep fa3 --heads-dims 64 128 256 --mode bwd fwd_bwd \
    --impls flashkit flashkit_deterministic sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag bwd-v7 --no-plot
step sanitize_ks 200 python3 "$OLDPWD/$T/scripts/sanitize_bwd.py" --dims 256
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
step memcheck_ks 200 $S --tool memcheck --error-exitcode 1 python3 "$OLDPWD/$T/scripts/sanitize_bwd.py" --quick --dims 256
step racecheck_ks 300 $S --tool racecheck --error-exitcode 1 --print-limit 20 python3 "$OLDPWD/$T/scripts/sanitize_bwd.py" --quick --dims 256
cat $O/summary.txt
tar -czf $OUT/fin.tgz -C $OUT fin bwddef
