#!/usr/bin/env bash
# Device call of the forty-second session (2026-11-29): the whole GPU test suite on HEAD (the forward's Q in registers
# by default since 9e9eb32), with OMP_NUM_THREADS=2 for every test process (the CPU references of 8 parallel pytest
# workers oversubscribed the 16 cores: the backward families file's reference took ~106 s a case with the default
# threads, 3 s with 2). Step limit SUITE_LIMIT (default 470 s); pytest's slowest 30 tests in the log.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/session42_suite.sh", timeout_s=600)
set -u -o pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp}/s42s
. "$(dirname "$0")/device_steps.sh"
watchdog_start "${PACK_AT:-560}"
install_tree "$TREE"
export OMP_NUM_THREADS=2
step suite "${SUITE_LIMIT:-470}" bash -c "cd $TREE/tests/python && python3 -m pytest -q -m gpu -n ${SUITE_N:-8} \
  -p no:cacheprovider --durations=30 ."
grep -E "passed|failed" "$O/suite.log" | tail -3 >> "$O/summary.txt"
grep -E "^FAILED|^ERROR" "$O/suite.log" | cut -c1-200 >> "$O/summary.txt"
pack
watchdog_stop; exit 0
