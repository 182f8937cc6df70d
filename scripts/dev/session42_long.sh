#!/usr/bin/env bash
# Device call of the forty-second session (2026-11-29): is RS-Q's loss on the long non-causal rows real?
# session42.sh B (two rounds) measured RS-Q against the default at 8k non-causal: D 128 bf16 0.965, fp16 0.942, D 96
# 0.955, 16k 0.985 / 0.983; the default's own 8k samples spread 7 % (597 / 556). Both builds installed once
# (pip --target /tmp/pkg_base, /tmp/pkg_rsq, no rebuild between rounds), then ROUNDS interleaved rounds (order
# alternated) of the FA3 D 128 rows and the dims sweep's D 96 / 192 rows at S 1k / 4k / 8k / 16k, both causal settings.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session42_long.sh", timeout_s=600)
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s42l
. "$(dirname "$0")/device_steps.sh"
device_header
watchdog_start "${PACK_AT:-560}"
D=$TREE/src/kernels/fwd_sm90/inst
inst_variants "$(for f in bf16_hd96 fp16_hd96 bf16_hd128 fp16_hd128 bf16_hd192 fp16_hd192; do echo "$D/fwd_sm90_$f.cu"; done)" \
  "base=|rsq=FLASHKIT_FWD_RS_Q 1" 400  # (ran at 3b73faa; since 9e9eb32 RS-Q is the default and both arms are RS-Q)
for ((r = 1; r <= ${ROUNDS:-4}; r++)); do
  order="base rsq"; [ $((r % 2)) = 0 ] && order="rsq base"
  for n in $order; do
    (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "fa3_$n$r" 120 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 \
      --seqlens 1024 4096 8192 16384 --impls flashkit --out-dir "$O/bench" --tag "fa3-$n$r" --no-plot)
    (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "dims_$n$r" 120 python3 -m flashkit.bench --sweep dims \
      --seqlens 1024 4096 8192 16384 --impls flashkit --out-dir "$O/bench" --tag "dims-$n$r" --no-plot)
    (cd /tmp && PYTHONPATH=/tmp/pkg_$n step "fp16_$n$r" 120 python3 -m flashkit.bench --sweep fa3 --heads-dims 128 \
      --seqlens 4096 8192 16384 --causal no --dtype fp16 --impls flashkit --out-dir "$O/bench" --tag "fp16-$n$r" --no-plot)
  done
  pack
done
(cd /tmp && PYTHONPATH=/tmp/pkg_rsq python3 -c "import flashkit, sys; print(flashkit.__file__)") >> "$O/summary.txt" 2>&1
pack
watchdog_stop; exit 0
