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
set -u -o pipefail
D=$(cd "$(dirname "$0")" && pwd)
TREE=$(cd "$D/../.." && pwd)
case "${1:-HA}" in
  HA)
    O=${OUT:-/tmp}/ha
    . "$D/device_steps.sh"
    OLD=${OLD_TREE:-$TREE/.carry/old}
    install_tree "$TREE"
    step install_old 400 python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$OLD/build/gpu" \
      -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF --target /tmp/oldpkg "$OLD"
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
  *) echo "usage: $0 HA" >&2; exit 2 ;;
esac
