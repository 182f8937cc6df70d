#!/usr/bin/env bash
# Device run: ncu source-level counters (instructions executed and stall samples per SASS
# line) of the forward kernel on one shape, summarized by scripts/dev/ncu_top_stalls.py.
#   run(carry=[".carry/cur"], command="bash .carry/cur/scripts/dev/fwd_ncu_source.sh 128 512 1")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/ncusrc
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
step ncu 240 /usr/local/cuda/bin/ncu --section SourceCounters --section WarpStateStats -k regex:fwd_kernel -s 2 -c 1 \
  -f -o /tmp/rep python3 "$TREE/scripts/dev/fwd_case.py" "$@"
step export 120 bash -c "/usr/local/cuda/bin/ncu -i /tmp/rep.ncu-rep --page source --csv --print-source sass > /tmp/src.csv"
python3 - > "$O/by_region.txt" <<'PY'
import csv
rows = list(csv.reader(open("/tmp/src.csv")))
start = next(i for i, r in enumerate(rows) if r and r[0].strip() == "Address")
hdr = [h.strip() for h in rows[start]]
def col(*names):
    for n in names:
        if n in hdr: return hdr.index(n)
    return None
ai, si = col("Address"), col("Source")
ie = col("Instructions Executed", "Warp Instructions Executed", "inst_executed")
ws = col("Warp Stall Sampling (All Samples)")
print("columns:", [h for h in hdr][:30])
tot = 0; lines = []
for r in rows[start + 1:]:
    try: n = float((r[ie] or "0").replace(",", ""))
    except (ValueError, TypeError, IndexError): continue
    w = float((r[ws] or "0").replace(",", "")) if ws is not None else 0
    tot += n; lines.append((r[ai], r[si], n, w))
print("total warp instructions executed", tot)
for a, s, n, w in lines:
    print(f"{n:12.0f} {w:8.0f} {a} {s[:110]}")
PY
python3 "$TREE/scripts/dev/ncu_top_stalls.py" /tmp/src.csv > "$O/top_stalls.txt" 2>&1
gzip -c /tmp/src.csv > "$O/src.csv.gz"
tar -czf "${OUT:-/tmp}/ncusrc.tgz" -C "$(dirname "$O")" "$(basename "$O")"
