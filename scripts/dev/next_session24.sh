#!/usr/bin/env bash
# Device calls prepared in the twenty-eighth session (2026-11-28) for the next one.
#   E (~3 min; NOT RUN): the persistent forward's tile timeline today (fwd_sm90.md "What is left", the
#      ping-pong model's open input): two trace builds of main's D 128 kernels side by side,
#      FLASHKIT_FWD_TRACE=1 (tile begin, Q / K(0) waits, first S, main loop, epilogue) and =2 (the
#      epilogue's parts: normalized, staged), each installed with pip --target, then
#      scripts/dev/fwd_trace.py at D 128, S 512 / 1k, causal and not. The epilogue's length decides
#      whether the model's "warpgroup 1 half a tile behind" would pay (0.9 us: +6%; 1.9 us: -6.6%,
#      scripts/dev/models/fwd_pingpong_model.py --epilogue X).
#   run(command="bash scripts/dev/next_session24.sh E")
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-E}" in
  E)
    O=${OUT:-/tmp}/e; . "$D/device_steps.sh"
    device_header
    pids=()
    for tr in 1 2; do
      define_variant "$TREE" /tmp/tr$tr "FLASHKIT_FWD_TRACE $tr" "fwd_sm90_bf16_hd128 fwd_sm90_fp16_hd128" /tmp/tr${tr}pkg &
      pids+=($!)
    done
    wait "${pids[@]}"
    for s in 512 1024; do
      for c in 0 1; do
        (cd /tmp && PYTHONPATH=/tmp/tr1pkg step "trace1_${s}_$c" 120 python3 "$TREE/scripts/dev/fwd_trace.py" 128 $s $c)
        (cd /tmp && PYTHONPATH=/tmp/tr2pkg step "trace2_${s}_$c" 120 python3 "$TREE/scripts/dev/fwd_trace.py" 128 $s $c epi)
      done
    done
    for f in "$O"/trace*.log; do echo "== $(basename "$f")"; tail -12 "$f"; done
    cat "$O/summary.txt"
    ;;
  *) echo "usage: $0 E" >&2; exit 2 ;;
esac
