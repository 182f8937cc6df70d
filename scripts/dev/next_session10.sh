#!/usr/bin/env bash
# Device calls of 2026-11-27 (eighteenth session):
#   HA (~6 min)  host time of eager calls, this tree against an older one (OLD_TREE, default
#                .carry/old: `git archive <sha> | tar -x -C .carry/old`, carried): both installed
#                (the old one with pip --target into /tmp/oldpkg), then this tree's host_pieces_probe.py
#                and decode_host_probe.py with each package, interleaved twice; then this tree's decode, MLA,
#                KV-cache and torch-integration GPU tests and the attention tests that touch streams,
#                devices, graphs and compile (the host path changed: the binding's device read,
#                _call_on, DecodePlan.run(out=, lse=)).
#   run(carry=[".carry/old"], command="bash scripts/dev/next_session10.sh HA")   output ha.tgz
#   MT (~6 min)  the tiny-call shortest split (min_chunk_tiny 64 where the balanced target is <= 32
#                tokens per CTA; FLASHKIT_DECODE_MIN_CHUNK_TINY=128 is the old plan): env A/B, two
#                interleaved rounds, graph timing (decode_quick_bench.py, bf16 / int8 / fp8); the decode,
#                KV-cache and MLA GPU tests (with HA's test fix), memcheck / racecheck of sanitize_decode.py.
#   run(command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session10.sh MT")    output mt.tgz
#   MB (~7 min)  MLA TMA boxes of 16 / 32 rows issued with broadcast coordinates (FLASHKIT_MLA_BOX_UNIFORM,
#                commit 06eb792; measured slower and reverted: docs/kernels/mla-logs/box-uniform-h100-2026-11-27/):
#                this tree against OLD_TREE (default .carry/old, installed with pip --target /tmp/oldpkg),
#                the MLA sweep (flashkit only, pages 16 / 32 / 64, h_q 64 / 128, s_q 1 / 2, fixed lengths),
#                two interleaved rounds; then this tree's MLA GPU tests and memcheck / synccheck of
#                sanitize_mla.py.
#   run(carry=[".carry/old"], command="FLASHKIT_COMMIT=<sha> bash scripts/dev/next_session10.sh MB")   output mb.tgz
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-HA}" in
  HA)
    O=${OUT:-/tmp}/ha
    . "$D/device_steps.sh"
    OLD=${OLD_TREE:-$TREE/.carry/old}
    install_tree "$TREE"
    install_old "$OLD"
    cd /tmp
    for r in 1 2; do
      mkdir -p "$O/old$r" "$O/new$r"
      step "pieces_old$r" 120 env PYTHONPATH=/tmp/oldpkg python3 "$TREE/scripts/dev/host_pieces_probe.py" --out "$O/old$r"
      step "pieces_new$r" 120 python3 "$TREE/scripts/dev/host_pieces_probe.py" --out "$O/new$r"
      step "probe_old$r" 150 env PYTHONPATH=/tmp/oldpkg python3 "$TREE/scripts/dev/decode_host_probe.py" --out "$O/old$r"
      step "probe_new$r" 150 python3 "$TREE/scripts/dev/decode_host_probe.py" --out "$O/new$r"
    done
    (cd "$TREE/tests/python" && step tests 330 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_mla_gpu.py test_kvcache_gpu.py test_torch_integration_gpu.py test_index_hardening_gpu.py)
    (cd "$TREE/tests/python" && step tests_attn 200 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_attention_gpu.py -k "graph or compile or device or stream or autograd or strided")
    tar -czf "${OUT:-/tmp}/ha.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  MT)
    O=${OUT:-/tmp}/mt
    . "$D/device_steps.sh"
    install_tree "$TREE"
    CFGS=${CFGS:-"1:1024:32:8 1:1536:32:8 1:2048:32:8 1:4096:32:8 1:1024:64:8 2:512:32:8 1:1024:32:32 4:1024:32:8"}
    cd /tmp
    for r in 1 2; do
      for v in 128 64; do
        step "mc$v-$r" 150 env FLASHKIT_DECODE_MIN_CHUNK_TINY=$v python3 "$TREE/scripts/decode_quick_bench.py" \
          --kv bf16 int8 fp8 --configs $CFGS --csv "$O/mc$v-$r.csv"
      done
    done
    (cd "$TREE/tests/python" && step tests 330 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_decode_gpu.py test_kvcache_gpu.py test_mla_gpu.py test_index_hardening_gpu.py)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    step memcheck 200 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py"
    step racecheck 200 $S --tool racecheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_decode.py" --quick
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    python3 "$D/decode_min_chunk_table.py" "$O" 128 64 | tee -a "$O/summary.txt"
    tar -czf "${OUT:-/tmp}/mt.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  MB)
    O=${OUT:-/tmp}/mb
    . "$D/device_steps.sh"
    OLD=${OLD_TREE:-$TREE/.carry/old}
    install_tree "$TREE"
    install_old "$OLD"
    cd /tmp
    B=(python3 -m flashkit.bench --op mla --impls flashkit --page-sizes 16 32 64 --heads 64 128 --sq 1 2
       --modes fixed --no-plot)
    for r in 1 2; do
      step "old$r" 200 env PYTHONPATH=/tmp/oldpkg "${B[@]}" --out-dir "$O/bench" --tag "old$r"
      step "new$r" 200 "${B[@]}" --out-dir "$O/bench" --tag "new$r"
    done
    (cd "$TREE/tests/python" && step tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
      test_mla_gpu.py test_mla_fp8_gpu.py)
    export PYTORCH_NO_CUDA_MEMORY_CACHING=1
    step memcheck 250 $S --tool memcheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_mla.py"
    step synccheck 200 $S --tool synccheck --error-exitcode 1 python3 "$TREE/scripts/sanitize_mla.py" --quick
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
    tar -czf "${OUT:-/tmp}/mb.tgz" -C "$(dirname "$O")" "$(basename "$O")"
    ;;
  *) echo "usage: $0 HA|MT|MB" >&2; exit 2 ;;
esac
