#!/usr/bin/env bash
# Device run: ncu of the Hopper MLA split kernel (dev harness binary .carry/mlabin/mla_$VAR)
# and of FlashMLA's (prebuilt .carry/flashmla_built, scripts/dev/mla_profile.py --flashmla) on one shape
# (CFG="hq sq mean", b 128, causal, page 64): per-opcode executed instructions, warp
# states, issue activity; and the source-level SASS counters of ours (stall samples per line).
#   run(carry=[".carry/mlabin", ".carry/flashmla_built"], command="CFG='128 2 8192' bash scripts/dev/mla_ncu_compare.sh")
set -u
R=$PWD
O=${OUT:-/tmp}/ncu; mkdir -p "$O"
CFG=${CFG:-128 2 8192}
VAR=${VAR:-staged}
FM=$R/.carry/flashmla_built
NCU=/usr/local/cuda/bin/ncu
M=${M:-gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second,dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__thread_inst_executed_per_inst_executed.ratio}
for who in fk fm; do
  if [ $who = fk ]; then cmd=("$R/.carry/mlabin/mla_$VAR" perf $CFG); k=regex:mla_split
  else cmd=(python3 "$R/scripts/dev/mla_profile.py" --flashmla "$CFG"); k=regex:splitkv; fi
  PYTHONPATH=$FM timeout 150 $NCU --metrics $M --section InstructionStats --section WarpStateStats --print-details all \
    -k $k -s 3 -c 1 "${cmd[@]}" > "$O/stats_$who.txt" 2>&1
  echo "== $who"; grep -E "__|Stall|Warp Cycles|Issued|Executed Ipc" "$O/stats_$who.txt" | head -60
done
timeout 200 $NCU --section SourceCounters --section WarpStateStats -k regex:mla_split -s 3 -c 1 -f -o /tmp/rep \
  "$R/.carry/mlabin/mla_$VAR" perf $CFG > "$O/src_run.txt" 2>&1
$NCU -i /tmp/rep.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>/dev/null
python3 "$R/scripts/dev/ncu_top_stalls.py" /tmp/src.csv > "$O/top_stalls.txt" 2>&1
gzip -c /tmp/src.csv > "$O/src.csv.gz"
if [ -n "${FMSRC-1}" ]; then
  PYTHONPATH=$FM timeout 200 $NCU --section SourceCounters -k regex:splitkv -s 3 -c 1 -f -o /tmp/repfm \
    python3 "$R/scripts/dev/mla_profile.py" --flashmla "$CFG" > "$O/src_run_fm.txt" 2>&1
  $NCU -i /tmp/repfm.ncu-rep --page source --csv --print-source sass > /tmp/srcfm.csv 2>/dev/null
  python3 "$R/scripts/dev/ncu_top_stalls.py" /tmp/srcfm.csv > "$O/top_stalls_fm.txt" 2>&1
  gzip -c /tmp/srcfm.csv > "$O/srcfm.csv.gz"
fi
tail -3 "$O/top_stalls.txt" "$O/top_stalls_fm.txt"
tar -czf "${OUT:-/tmp}/ncu.tgz" -C "$(dirname "$O")" "$(basename "$O")"
