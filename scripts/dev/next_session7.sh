#!/usr/bin/env bash
# The device calls owed after 2026-11-27 (sixteenth session), in this order:
#   GS (~7 min)  the GQA split (off by default; docs/kernels/bwd.md "GQA: the group split"):
#                run(command="bash scripts/dev/bwd_gqa_split_ab.sh"): its GPU tests, memcheck /
#                racecheck with the split forced, and the GQA 8 sweep with the arms never (default) /
#                the measured window (=w) / clusters of 2 / 4. Turn the window (or better) on by
#                default if its rows gain as predicted and the rest are level.
#   L  (~5 min)  on main: define A/B of FLASHKIT_BWD_LSE_FILL_INF (D 64 / 128 ping-pong kernels, fast and
#                deterministic, two rounds; prediction +1..2%), then the variant's correctness
#                (test_backward_gpu.py -k "D64 or D128" and sanitize_bwd.py --quick --dims 64 128)
#   DEC (~10 min) the decode sweep with peers, batch 1 / 16 (the 128-token shortest split in a
#                results file): build the FlashInfer peer first, here, in the background at the start
#                of the session (bench/peers/flashinfer/build.sh, 15-25 min on 2 cores), then
#                rm -rf .carry/cur && mkdir -p .carry/cur && git archive HEAD | tar -x -C .carry/cur
#                run(carry=[".carry/cur", ".carry/flashinfer"],
#                    command="FLASHKIT_COMMIT=<sha> bash .carry/cur/scripts/dev/decode_sweep_run.sh A")
#   run(command="bash scripts/dev/next_session7.sh L")    output bwddef.tgz, lsefill.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-L}" in
  L)
    INSTS="bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128" DIMS="64 128" IMPLS="flashkit flashkit_deterministic" ROUNDS=2 \
      bash "$D/bwd_define_ab.sh" l0= l1='FLASHKIT_BWD_LSE_FILL_INF 1'
    O=${OUT:-/tmp}/lsefill
    . "$D/device_steps.sh"
    for f in bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128; do
      cp "$TREE/src/kernels/bwd_sm90/inst/$f.cu" "$O/$f.orig"
      with_defines "$O/$f.orig" "FLASHKIT_BWD_LSE_FILL_INF 1" > "$TREE/src/kernels/bwd_sm90/inst/$f.cu"
    done
    install_cmd "$TREE"
    step build 400 "${INSTALL[@]}"
    (cd "$TREE/tests/python" && step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_backward_gpu.py -k "D64 or D128 or gqa or determin")
    (cd /tmp && step sanitize 300 python3 "$TREE/scripts/sanitize_bwd.py" --quick --dims 64 128)
    for f in bwd_sm90_bf16_hd64 bwd_sm90_bf16_hd128; do
      restore_inst "$O/$f.orig" "$TREE/src/kernels/bwd_sm90/inst/$f.cu"
    done
    tar -czf "${OUT:-/tmp}/lsefill.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 L (GS: scripts/dev/bwd_gqa_split_ab.sh; DEC: see the header)" >&2
     exit 2 ;;
esac
