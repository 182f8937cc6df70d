#!/usr/bin/env bash
# Device run: the Hopper MLA split kernel's dev-harness variants (prebuilt binaries in
# .carry/mlabin/mla_<name>, from scripts/dev/mla_sm90_check.cu with -D switches), interleaved
# over ROUNDS, on CFGS ("hq sq mean;..."; b 128, causal, page 64), plus the trace binaries
# (mla_trace*) and, when .carry/flashmla (sources) or FM_BUILT (a flashmla_built folder) is
# there, FlashMLA on the same shapes (scripts/dev/mla_profile.py --flashmla) and ncu L2 sectors of both.
#   run(carry=[".carry/mlabin", ".carry/flashmla"], command="bash scripts/dev/mla_variants.sh")
set -u
R=$PWD
O=${OUT:-/tmp}/mla; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
BIN=$R/.carry/mlabin
FM=${FM_BUILT:-}
if [ -z "$FM" ] && [ -d .carry/flashmla ]; then
  ( cd .carry/flashmla && CPLUS_INCLUDE_PATH=/usr/local/cuda/include/cccl MAX_JOBS=4 NVCC_THREADS=4 \
      python3 setup.py build_ext --inplace > "$O/fm_build.log" 2>&1; echo "rc $?" >> "$O/fm_build.log" ) &
  FMPID=$!
fi
CFGS=${CFGS:-"16 1 16384;64 1 16384;128 2 16384;128 1 8192;32 2 4096"}
VARS=${VARS:-$(cd "$BIN" && ls mla_* | grep -v trace | sed 's/^mla_//' | tr '\n' ' ')}
IFS=';' read -r -a CF <<< "$CFGS"
for v in $VARS; do
  case $v in abl*) continue ;; esac  # ablations compute wrong results on purpose
  [ -n "${CHECK-1}" ] && { timeout 120 "$BIN/mla_$v" > "$O/check_$v.txt" 2>&1; echo "check $v: $(tail -1 "$O/check_$v.txt")"; }
done
for r in $(seq 1 "${ROUNDS:-2}"); do
  for c in "${CF[@]}"; do
    for v in $VARS; do
      echo "r$r $v $(timeout 60 "$BIN/mla_$v" perf $c 2>&1 | tail -1)" | tee -a "$O/perf.txt"
    done
  done
done
for t in $(cd "$BIN" && ls mla_trace* 2>/dev/null); do
  for c in "${CF[@]}"; do
    { echo "== $t $c"; timeout 60 "$BIN/$t" perf $c 2>&1 | tail -8; } | tee -a "$O/trace.txt"
  done
done
if [ -n "${FMPID:-}" ]; then
  wait $FMPID; tail -3 "$O/fm_build.log"
  FM=/tmp/fm/flashmla_built; mkdir -p $FM
  ( cd .carry/flashmla && cp -r flash_mla flash_mla_cuda*.so $FM/ && rm -rf $FM/flash_mla/__pycache__ && cp LICENSE $FM/LICENSE.FlashMLA && mkdir -p $FM/tests && cp tests/test_flash_mla.py $FM/tests/ )
  tar -C /tmp/fm -cf "${OUT:-/tmp}/flashmla_built.tar" flashmla_built
fi
if [ -n "$FM" ]; then
  PYTHONPATH=$FM timeout 200 python3 "$R/scripts/dev/mla_profile.py" --flashmla "$CFGS" 2>&1 | tee "$O/fm_time.txt"
  if [ -n "${NCU-1}" ]; then
    M=dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
    PYTHONPATH=$FM timeout 120 /usr/local/cuda/bin/ncu --metrics $M -k regex:splitkv -s 3 -c 1 python3 "$R/scripts/dev/mla_profile.py" --flashmla "16 1 16384" > "$O/ncu_fm_h16.txt" 2>&1
    timeout 120 /usr/local/cuda/bin/ncu --metrics $M -k regex:mla_split -s 3 -c 1 "$BIN/mla_base" perf 16 1 16384 > "$O/ncu_fk_h16.txt" 2>&1
    PYTHONPATH=$FM timeout 120 /usr/local/cuda/bin/ncu --metrics $M -k regex:splitkv -s 3 -c 1 python3 "$R/scripts/dev/mla_profile.py" --flashmla "128 2 8192" > "$O/ncu_fm_h128.txt" 2>&1
    timeout 120 /usr/local/cuda/bin/ncu --metrics $M -k regex:mla_split -s 3 -c 1 "$BIN/mla_base" perf 128 2 8192 > "$O/ncu_fk_h128.txt" 2>&1
    grep -hE "sectors|requests|duration|throughput|hmma|inst_executed" "$O"/ncu_*.txt
  fi
fi
tar -czf "${OUT:-/tmp}/mla.tgz" -C "$(dirname "$O")" "$(basename "$O")"
