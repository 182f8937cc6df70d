#!/usr/bin/env bash
# Device run: does keeping the m-block CTAs of a part in step (clusters + a per-pair cluster barrier,
# FLASHKIT_MLA_LOCKSTEP) cut the MLA split kernel's DRAM re-reads of K and its chunk waits?
# (docs/kernels/mla.md "Lockstep": negative; the switch was removed after the run, it is in commit efe6ecb.) Binaries from scripts/dev/mla_build_variants.sh in .carry/mlabin:
#   mla_base, mla_lock4, mla_lock2 (FLASHKIT_MLA_LOCKSTEP=4 / 2), mla_trace, mla_tlock4 (+ FLASHKIT_MLA_TRACE=1).
# Optional: .carry/flashmla (FlashMLA's sources, bench/peers/flashmla/build.sh sources) is compiled in the
# background and packed to $OUT/flashmla_built.tar.
#   run(carry=[".carry/mlabin", ".carry/flashmla"], command="bash scripts/dev/mla_lockstep.sh")
set -u
R=$PWD
O=${OUT:-/tmp}/lock; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
BIN=$R/.carry/mlabin
if [ -d .carry/flashmla ] && [ -z "${NO_FM:-}" ]; then
  ( cd .carry/flashmla && CPLUS_INCLUDE_PATH=/usr/local/cuda/include/cccl MAX_JOBS=4 NVCC_THREADS=4 \
      python3 setup.py build_ext --inplace > "$O/fm_build.log" 2>&1; echo "rc $?" >> "$O/fm_build.log" ) &
  FMPID=$!
fi
# Checks (11 mixed cases against the CPU reference, 4 of them with several m-blocks).
for v in base lock4 lock2; do
  timeout 120 "$BIN/mla_$v" > "$O/check_$v.txt" 2>&1; echo "check $v: rc $? $(tail -1 "$O/check_$v.txt")" | tee -a "$O/summary.txt"
done
# How many clusters fit at once (the launcher prints it on the first clustered launch).
for c in 4 2; do
  timeout 60 "$BIN/mla_lock$c" perf 128 2 4096 > "$O/fit$c.txt" 2>&1
  grep "lockstep" "$O/fit$c.txt" | tee -a "$O/summary.txt"
done
fit4=$(grep -o "clusters of 4: [0-9]*" "$O/fit4.txt" | awk '{print $4}')
fit2=$(grep -o "clusters of 2: [0-9]*" "$O/fit2.txt" | awk '{print $4}')
S4=$(( ${fit4:-33} * 4 < 132 ? ${fit4:-33} * 4 : 132 ))
S2=$(( ${fit2:-66} * 2 < 132 ? ${fit2:-66} * 2 : 132 ))
echo "SMs used: lock4 $S4, lock2 $S2" | tee -a "$O/summary.txt"
CFGS=${CFGS:-"128 2 16384;128 1 8192;64 2 8192;32 2 4096;128 2 4096;64 1 16384;16 1 16384"}
IFS=';' read -r -a CF <<< "$CFGS"
for r in 1 2; do
  for c in "${CF[@]}"; do
    for v in base lock4 lock2 base_s4; do
      case $v in
        base) env_v="MLA_SMS=132"; b=base ;;
        base_s4) env_v="MLA_SMS=$S4"; b=base ;;
        lock4) env_v="MLA_SMS=$S4"; b=lock4 ;;
        lock2) env_v="MLA_SMS=$S2"; b=lock2 ;;
      esac
      echo "r$r $v $(env $env_v timeout 60 "$BIN/mla_$b" perf $c 2>/dev/null | tail -1)" | tee -a "$O/perf.txt"
    done
  done
done
for t in trace tlock4; do
  for c in "128 2 16384" "128 1 8192" "64 2 8192"; do
    s=132; [ $t = tlock4 ] && s=$S4
    { echo "== $t $c (MLA_SMS=$s)"; MLA_SMS=$s timeout 60 "$BIN/mla_$t" perf $c 2>&1 | tail -8; } | tee -a "$O/trace.txt"
  done
done
M=dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for c in "128 2 8192" "128 1 8192"; do
  for v in base lock4 lock2; do
    s=132; [ $v = lock4 ] && s=$S4; [ $v = lock2 ] && s=$S2
    MLA_SMS=$s timeout 120 /usr/local/cuda/bin/ncu --metrics $M -k regex:mla_split -s 3 -c 1 "$BIN/mla_$v" perf $c \
      > "$O/ncu_${v}_${c// /_}.txt" 2>&1
    echo "ncu $v $c: $(grep -E "dram__sectors|lookup_hit|op_read.sum |duration|hmma" "$O/ncu_${v}_${c// /_}.txt" | awk '{print $1, $NF}' | tr '\n' ' ')" | tee -a "$O/summary.txt"
  done
done
if [ -n "${FMPID:-}" ]; then
  wait $FMPID; tail -3 "$O/fm_build.log"
  FM=/tmp/fm/flashmla_built; mkdir -p $FM
  ( cd .carry/flashmla && cp -r flash_mla flash_mla_cuda*.so $FM/ && rm -rf $FM/flash_mla/__pycache__ \
      && cp LICENSE $FM/LICENSE.FlashMLA && mkdir -p $FM/tests && cp tests/test_flash_mla.py $FM/tests/ \
      && cp SOURCES.txt $FM/ && sha256sum flash_mla_cuda*.so > $FM/BUILD_INFO.txt )
  tar -C /tmp/fm -cf "${OUT:-/tmp}/flashmla_built.tar" flashmla_built
  PYTHONPATH=$FM timeout 200 python3 "$R/scripts/dev/mla_profile.py" --flashmla "$CFGS" 2>&1 | tee "$O/fm_time.txt"
fi
tar -czf "${OUT:-/tmp}/lock.tgz" -C "$(dirname "$O")" "$(basename "$O")"
