#!/usr/bin/env bash
# Device run: the forward rows that complete a results file: the FA3 sweep in fp16 (quick set,
# cuDNN), and D 96/192 (bf16) with SDPA cuDNN / flash, then the portable family on D 96/192
# (FLASHKIT_FWD_PORTABLE=1; issue 8's D 96/192 bar is against it).
#   run(carry=[".carry/cur"], command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/fwd_results_extra.sh")
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/extra
. "$(dirname "$0")/device_steps.sh"
install_cmd "$TREE"
step install 300 "${INSTALL[@]}"
cd /tmp
[ -n "${FP16-1}" ] && step fp16 200 python3 -m flashkit.bench --sweep fa3 --quick --dtype fp16 --impls flashkit sdpa_cudnn --out-dir "$O/bench" --tag fp16
step dims 200 python3 -m flashkit.bench --sweep dims --impls flashkit sdpa_cudnn sdpa_flash --out-dir "$O/bench" --tag dims
step dims_portable 200 env FLASHKIT_FWD_PORTABLE=1 python3 -m flashkit.bench --sweep dims --impls flashkit --out-dir "$O/bench" --tag dims-portable
rm -f "$O"/bench/*.png
tar -czf "${OUT:-/tmp}/extra.tgz" -C "$(dirname "$O")" "$(basename "$O")"
