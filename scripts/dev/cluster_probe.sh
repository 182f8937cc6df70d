#!/usr/bin/env bash
# Device run of scripts/dev/cluster_probe.cu (the cluster / DSMEM primitives, src/prims/cluster.cuh):
# build, run, and the same under compute-sanitizer memcheck, racecheck and synccheck. ~1 minute.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/cluster_probe.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/cluster
. "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
step build 120 /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$TREE/src" \
  -o /tmp/cluster_probe "$TREE/scripts/dev/cluster_probe.cu"
step probe 60 /tmp/cluster_probe
for tool in memcheck racecheck synccheck; do
  step "$tool" 300 $S --tool $tool --error-exitcode 1 /tmp/cluster_probe
done
cat "$O/probe.log" >> "$O/summary.txt"
