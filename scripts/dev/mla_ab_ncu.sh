#!/usr/bin/env bash
# Device run: dev-harness variants in .carry/mlabin (mla_<name>, scripts/dev/mla_build_variants.sh) timed in
# interleaved rounds by scripts/dev/mla_variants.sh, then ncu counters (DRAM and L2 sectors, instructions,
# time) of each variant on NCU_CFGS ("hq sq mean;...").
#   run(carry=[".carry/mlabin"], command="bash scripts/dev/mla_ab_ncu.sh")
set -u
R=$PWD
NCU=1 FM_BUILT= bash "$R/scripts/dev/mla_variants.sh" > "${OUT:-/tmp}/variants.log" 2>&1
O=${OUT:-/tmp}/mla
M=dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_elapsed
IFS=';' read -r -a NC <<< "${NCU_CFGS:-128 2 8192;16 1 16384}"
for c in "${NC[@]}"; do
  for b in $(cd "$R/.carry/mlabin" && ls mla_* | grep -v trace); do
    timeout 120 /usr/local/cuda/bin/ncu --metrics $M -k regex:mla_split -s 3 -c 1 "$R/.carry/mlabin/$b" perf $c > "$O/ncu_${b}_${c// /_}.txt" 2>&1
    echo "ncu $b $c: $(grep -E "^ +(dram|lts|gpu__time|smsp|sm__pipe)" "$O/ncu_${b}_${c// /_}.txt" | awk '{print $1, $NF}' | tr '\n' ' ')" | tee -a "$O/ncu_summary.txt"
  done
done
tar -czf "${OUT:-/tmp}/mla.tgz" -C "$(dirname "$O")" "$(basename "$O")"
