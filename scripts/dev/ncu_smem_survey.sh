#!/usr/bin/env bash
# Device run: ncu source counters (shared-memory wavefronts, ideal and excessive, per SASS line;
# stall samples) and speed of light of the forward kernels on a few shapes, and of the Hopper
# backward, for a survey of shared-memory bank conflicts. Summaries by scripts/dev/ncu_smem_lines.py.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/ncu_smem_survey.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/smem
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
NCU="/usr/local/cuda/bin/ncu --section SourceCounters --section SpeedOfLight --section WarpStateStats"
for c in "64 4096 0" "128 2048 0" "256 2048 0" "128 512 1"; do
  n=fwd-${c// /-}
  step "$n" 200 $NCU -k regex:fwd -s 2 -c 1 -f -o /tmp/$n python3 "$TREE/scripts/dev/fwd_case.py" $c
  /usr/local/cuda/bin/ncu -i /tmp/$n.ncu-rep --page details > "$O/$n-details.txt" 2>&1
  /usr/local/cuda/bin/ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$O/$n-src.csv.gz"
  python3 "$TREE/scripts/dev/ncu_smem_lines.py" <(zcat "$O/$n-src.csv.gz") > "$O/$n-smem.txt" 2>&1
done
n=bwd-128-4096
step "$n" 200 $NCU -k regex:bwd_pp_kernel -s 2 -c 1 -f -o /tmp/$n python3 "$TREE/scripts/dev/bwd_profile_case.py" 4 4096 16 128 0
/usr/local/cuda/bin/ncu -i /tmp/$n.ncu-rep --page details > "$O/$n-details.txt" 2>&1
/usr/local/cuda/bin/ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$O/$n-src.csv.gz"
python3 "$TREE/scripts/dev/ncu_smem_lines.py" <(zcat "$O/$n-src.csv.gz") > "$O/$n-smem.txt" 2>&1
tar -czf "${OUT:-/tmp}/smem.tgz" -C "$(dirname "$O")" "$(basename "$O")"
