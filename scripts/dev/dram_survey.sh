#!/usr/bin/env bash
# Device survey: DRAM bytes read / written and kernel time (ncu, every kernel of one measured call, summed)
# of FlashKit and cuDNN on FA3-sweep shapes (CASES="op D S causal;..."); dram.txt has one line per
# (case, impl); "decode B S_k 1" cases time a paged decode step (dram_survey.py). The question: where does a FlashKit kernel move more DRAM bytes than cuDNN (fwd_sm90.md,
# "Head-major order": the causal walk did). IMPLS (default "fk cudnn"), ENVS (VAR=VALUE pairs for ncu's process).
# EXTRA_METRICS: more ncu metrics (comma-separated) kept in the raw CSVs, e.g. the L2 hit / miss sectors
# lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum (the D 64 1k question).
# Units: the time column assumes ncu's raw page names them (nsecond / usecond); check one raw CSV.
#   run(command="bash scripts/dev/dram_survey.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/dram
. "$(dirname "$0")/device_steps.sh"
install_tree "$TREE"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum${EXTRA_METRICS:+,$EXTRA_METRICS}
IFS=';' read -r -a CS <<< "${CASES:-fwd 256 512 1;fwd 256 512 0;fwd 64 1024 1;bwd 128 1024 1;bwd 128 4096 0;bwd 256 1024 1}"
cd /tmp
for c in "${CS[@]}"; do
  set -- $c
  for impl in ${IMPLS:-fk cudnn}; do
    env ${ENVS:-} timeout 100 /usr/local/cuda/bin/ncu --metrics $M --profile-from-start off --csv --page raw \
      python3 "$TREE/scripts/dev/dram_survey.py" $impl $1 $2 $3 $4 > "$O/raw_$1_$2_$3_$4_$impl.csv" 2>/dev/null
    python3 - "$O/raw_$1_$2_$3_$4_$impl.csv" "$c $impl" <<'PY' | tee -a "$O/dram.txt"
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if len(rows) < 2:
    print(sys.argv[2], "no kernels"); sys.exit()
h = rows[0]; data = [r for r in rows[1:] if r[0].isdigit()]
ix = {n: h.index(n) for n in ("Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")}
units = rows[1]
def val(r, n):
    x = float(r[ix[n]].replace(",", "")); u = units[ix[n]]
    return x * {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3}.get(u, 1)
t = sum(val(r, "gpu__time_duration.sum") for r in data)
rd = sum(val(r, "dram__bytes_read.sum") for r in data) / 1e6
wr = sum(val(r, "dram__bytes_write.sum") for r in data) / 1e6
names = ",".join(sorted({r[ix["Kernel Name"]][:40] for r in data}))
print(f"{sys.argv[2]:24s} kernels {len(data)} time {t:9.1f} us  read {rd:8.1f} MB  write {wr:8.1f} MB  [{names}]")
PY
  done
done
cat "$O/summary.txt"
tar -czf "${OUT:-/tmp}/dram.tgz" -C "$(dirname "$O")" "$(basename "$O")"
