#!/usr/bin/env bash
# Status 2026-11-27 (fifteenth session): every call has run; C is kept as the trace recipe.
# Status 2026-11-27 (fourteenth session): B, E, F and A's results ran (bwd.md, "Lockstep and dQ
# first"; E / F's switches are removed, so E and F no longer build anything new); C, D and A's
# rotation part are still owed; the suite runs as two calls now (next_session5.sh S1 / S2).
# The device calls prepared on 2026-11-27 (thirteenth session), on main. They add up to more than
# one session's 30 device minutes: B first (owed), then E and F (the candidates to merge), then A
# (results with whatever merged), C and D as time allows.
#   A (~5 min)  install; backward results v11 (D 64 / 128 / 256, bwd and fwd_bwd, fast and
#               deterministic, cuDNN and FA2 in the same run: D 64's 128-row blocks, D 256's
#               deterministic pairs and rule); the window rows; then the deterministic D 64 walk's
#               rotation limit with 128-row blocks (FLASHKIT_BWD_DET_ROTATE_MAX = 0 / default 33 /
#               132, non-causal, two rounds): the 8k row (64 key blocks, not rotated by default)
#               gained only +6.8% and ran slower than 4k.
#   B (~9 min)  the whole GPU suite (owed: D 64's 128-row kernel is the default since b218dff).
#   C (~4 min)  step timelines of D 64's 128-row kernel against the 64-row one (bwd_pp_trace.sh,
#               S 4k / 16k non-causal, 16k causal): is the fixed part of a step now below half?
#   D (~4 min)  define A/B of FLASHKIT_BWD_DET_POLL_GATE_B_M128 (the 128-row D 64 deterministic
#               kernel reads its turn after the gate B issue instead of at the send; prediction
#               -1..+3%: +3.4% on the 64-row kernel, -1% at D 128), deterministic FA3 sweep D 64.
#   E (~6 min)  define A/B, fast and deterministic FA3 sweep D 64, of FLASHKIT_BWD_PP_LOCKSTEP_M128
#               (the 128-row kernels without the ping-pong gates: FlashAttention-3's lockstep, one
#               256-thread barrier a step; prediction: unknown sign, D 128 measured level long ago)
#               and FLASHKIT_BWD_PP_DQ_FIRST_M128 (fast kernel: the deferred dQ issued before dV / dK,
#               its staging and send overlapping them; prediction +2..5%), then sanitize_bwd.py
#               --dims 64 on the last build (DQ_FIRST). Read both with C's trace.
#   F (~4 min)  define A/B of FLASHKIT_BWD_PP_DQ_FIRST_D128 (D 128's fast kernel, the same reorder;
#               0 spills; prediction +1..4%), then sanitize_bwd.py --dims 128 on that build.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session4.sh A")   outputs res9.tgz, rot.tgz
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session4.sh B")   output res9.tgz
#   run(command="bash scripts/dev/next_session4.sh C")                         output pptrace.tgz
#   run(command="bash scripts/dev/next_session4.sh D")                         output bwddef.tgz (under bwddef/)
#   run(command="bash scripts/dev/next_session4.sh E")                         output lockstep.tgz
#   run(command="bash scripts/dev/next_session4.sh F")                         output dqfirst128.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
case "${1:-A}" in
  A)  # results v11 ran 2026-11-27; the rotation part moved to next_session5.sh R
    STEPS="install bwd window" BWD_TAG=bwd-v11 FWD_TAG=v11 bash "$D/results_v9.sh"
    ;;
  B) STEPS="install suite" bash "$D/results_v9.sh" ;;
  D) echo "D ran 2026-11-27 (fifteenth session, -1.8%); its switch is removed (bwd.md, \"Gate-B poll, rotation limit\")" >&2; exit 2 ;;
  E|F) echo "E / F ran 2026-11-27 (negative); their switches are removed (bwd.md, \"Lockstep and dQ first\")" >&2; exit 2 ;;
  C)
    M64=FLASHKIT_BWD_D64_M128=0
    SHAPES="64:4096:0 64:16384:0 64:16384:1 64:4096:0:0:$M64 64:16384:0:0:$M64 64:16384:1:0:$M64" \
      bash "$D/bwd_pp_trace.sh"
    ;;
esac
