#!/usr/bin/env bash
# FlashKit GPU suite: everything the GPU machine should run, in one go.
#
#   scripts/gpu_suite.sh [--install] [--out DIR] [--skip-tests] [--skip-sanitize]
#                        [--skip-bench] [--bench-args ARG...]
#
# Steps (each logged to DIR/<step>.log; a failed step does not stop the later ones):
#   env        nvidia-smi, python/torch/flashkit versions, compiled variants
#   install    only with --install: pip install --no-build-isolation . (else flashkit must
#              already be importable, e.g. PYTHONPATH=<build>/python)
#   pytest_cpu pytest tests/python -m "not gpu"   (argument checks, reference, bench CLI)
#   pytest_gpu pytest -m gpu tests/python         (accuracy, determinism, torch integration)
#   memcheck   compute-sanitizer --tool memcheck  on scripts/sanitize_small.py
#   racecheck  compute-sanitizer --tool racecheck on scripts/sanitize_small.py --quick
#   synccheck  compute-sanitizer --tool synccheck on scripts/sanitize_small.py --quick (barrier
#              misuse: the forward's named barriers and mbarriers; synccheck_decode / _bwd /
#              _mla on their scripts)
#   memcheck_portable, racecheck_portable
#              the same with FLASHKIT_FWD_PORTABLE=1: on a Hopper GPU the default runs
#              the sm90 kernels where they exist, this covers the portable ones too
#   pytest_notma, memcheck_notma, racecheck_notma
#              the forward tests and sanitizers with FLASHKIT_FWD_NO_TMA=1: the Hopper
#              forward's cp.async kernel (the fallback of the default TMA variant at D >= 96)
#   pytest_persist0/1, memcheck_persist0/1
#              the same with FLASHKIT_FWD_PERSISTENT=0 / =1: the TMA variant without / with
#              the persistent kernel on every call (the default picks per call)
#   memcheck_decode, racecheck_decode
#              the same tools on scripts/sanitize_decode.py (paged decode, append)
#   memcheck_bwd, racecheck_bwd
#              the same tools on scripts/sanitize_bwd.py (attention backward: fast and
#              deterministic modes, windows, softcaps, varlen)
#   memcheck_mla, racecheck_mla, memcheck_mla_portable
#              the same tools on scripts/sanitize_mla.py (MLA decode; the last one with
#              FLASHKIT_MLA_PORTABLE=1: the portable split kernel on a Hopper GPU too)
#   bench      python -m flashkit.bench [ARG...]  (--out-dir DIR/bench unless given)
#
# DIR defaults to $OUT (the device runner's output folder) or ./gpu_out. DIR/summary.txt
# lists each step's status; the exit status is non-zero if any step failed.
# Environment: PYTHON (default python3), PYTEST_ADDOPTS (extra pytest options),
# SANITIZER_ARGS (extra compute-sanitizer options, e.g. "--kernel-name kns=flashkit").

set -u -o pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${OUT:-$REPO/gpu_out}
INSTALL=0
RUN_TESTS=1
RUN_SANITIZE=1
RUN_BENCH=1
BENCH_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --install) INSTALL=1 ;;
    --out) OUT_DIR=$2; shift ;;
    --skip-tests) RUN_TESTS=0 ;;
    --skip-sanitize) RUN_SANITIZE=0 ;;
    --skip-bench) RUN_BENCH=0 ;;
    --bench-args) shift; BENCH_ARGS=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_suite.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

PY=${PYTHON:-python3}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
SUMMARY=$OUT_DIR/summary.txt
: > "$SUMMARY"
FAILED=()
cd "$REPO" || exit 2

# step NAME CMD...: run CMD, tee its output to OUT_DIR/NAME.log, record the status.
step() {
  local name=$1; shift
  local log=$OUT_DIR/$name.log start=$SECONDS rc
  echo
  echo "=== [$name] $*"
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    printf '%-11s ok     %5ss\n' "$name" "$took" | tee -a "$SUMMARY"
  else
    printf '%-11s FAILED %5ss (exit %s, see %s)\n' "$name" "$took" "$rc" "$log" | tee -a "$SUMMARY"
    FAILED+=("$name")
  fi
  return 0
}

skip() { printf '%-11s skipped (%s)\n' "$1" "$2" | tee -a "$SUMMARY"; }

show_env() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  repo: $REPO"
  echo "commit: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi
  else
    echo "nvidia-smi: not found"
  fi
  "$PY" - <<'EOF'
import sys
print("python", sys.version.split()[0], sys.executable)
try:
    import torch
    print("torch", torch.__version__, "CUDA", torch.version.cuda,
          "| device:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
except Exception as e:
    print("torch: not importable:", e)
try:
    import flashkit
    print("flashkit", flashkit.__version__, "from", flashkit.__file__)
    print("compiled forward variants:", ", ".join(flashkit.compiled_fwd_variants()))
except Exception as e:
    print("flashkit: not importable:", type(e).__name__, e)
EOF
}

install() {
  # CUDA 13 moved cuda/std headers under include/cccl (DEVICE-NOTES.md).
  local cccl=/usr/local/cuda/include/cccl
  if [ -d "$cccl" ]; then
    export CPLUS_INCLUDE_PATH=$cccl${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
  fi
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
  "$PY" -m pip install --no-build-isolation -v "$REPO"
}

check_import() {
  "$PY" -c 'import flashkit, sys; sys.exit(0 if flashkit._C is not None else
            "flashkit._C missing: " + str(flashkit._C_IMPORT_ERROR))'
}

find_sanitizer() {
  if command -v compute-sanitizer >/dev/null; then
    command -v compute-sanitizer
  elif [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    echo /usr/local/cuda/bin/compute-sanitizer
  fi
}

sanitize() {
  local tool=$1 sanitizer
  shift
  sanitizer=$(find_sanitizer)
  if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer: not found (PATH, /usr/local/cuda/bin)"
    return 127
  fi
  # Own cudaMalloc per tensor: out-of-bounds accesses are not hidden by the caching pool.
  # shellcheck disable=SC2086  # SANITIZER_ARGS is a list of options
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$sanitizer" --tool "$tool" --error-exitcode 1 \
    --print-limit 50 ${SANITIZER_ARGS:-} "$PY" "$REPO/scripts/${SANITIZE_SCRIPT:-sanitize_small.py}" "$@"
}

bench() {
  local args=("${BENCH_ARGS[@]}") a has_out=0
  for a in "${args[@]}"; do
    case "$a" in --out-dir|--out-dir=*) has_out=1 ;; esac
  done
  [ "$has_out" -eq 1 ] || args+=(--out-dir "$OUT_DIR/bench")
  "$PY" -m flashkit.bench "${args[@]}"
}

step env show_env
if [ "$INSTALL" -eq 1 ]; then
  step install install
fi
step import check_import

export FLASHKIT_REQUIRE_EXT=1   # a missing extension is an error, not a skip
if [ "$RUN_TESTS" -eq 1 ]; then
  step pytest_cpu "$PY" -m pytest tests/python -m "not gpu" -q \
    --junitxml="$OUT_DIR/pytest-cpu.xml"
  step pytest_gpu env FLASHKIT_REQUIRE_GPU=1 "$PY" -m pytest tests/python -m gpu -q \
    --durations=15 --junitxml="$OUT_DIR/pytest-gpu.xml"
  FLASHKIT_FWD_NO_TMA=1 step pytest_notma env FLASHKIT_REQUIRE_GPU=1 "$PY" -m pytest -q -m gpu \
    tests/python/test_attention_gpu.py tests/python/test_index_hardening_gpu.py
  for v in 0 1; do
    FLASHKIT_FWD_PERSISTENT=$v step pytest_persist$v env FLASHKIT_REQUIRE_GPU=1 "$PY" -m pytest -q -m gpu \
      tests/python/test_attention_gpu.py tests/python/test_index_hardening_gpu.py
  done
else
  skip pytest "--skip-tests"
fi

if [ "$RUN_SANITIZE" -eq 1 ]; then
  step memcheck sanitize memcheck
  step racecheck sanitize racecheck --quick  # racecheck is slow: fewer shapes
  step synccheck sanitize synccheck --quick
  FLASHKIT_FWD_NO_TMA=1 step memcheck_notma sanitize memcheck
  FLASHKIT_FWD_NO_TMA=1 step racecheck_notma sanitize racecheck --quick
  FLASHKIT_FWD_PERSISTENT=0 step memcheck_persist0 sanitize memcheck
  FLASHKIT_FWD_PERSISTENT=1 step memcheck_persist1 sanitize memcheck
  FLASHKIT_FWD_PORTABLE=1 step memcheck_portable sanitize memcheck
  FLASHKIT_FWD_PORTABLE=1 step racecheck_portable sanitize racecheck --quick
  SANITIZE_SCRIPT=sanitize_decode.py step memcheck_decode sanitize memcheck
  SANITIZE_SCRIPT=sanitize_decode.py step racecheck_decode sanitize racecheck --quick
  SANITIZE_SCRIPT=sanitize_bwd.py step memcheck_bwd sanitize memcheck
  SANITIZE_SCRIPT=sanitize_bwd.py step racecheck_bwd sanitize racecheck --quick
  SANITIZE_SCRIPT=sanitize_mla.py step memcheck_mla sanitize memcheck
  SANITIZE_SCRIPT=sanitize_mla.py step racecheck_mla sanitize racecheck --quick
  SANITIZE_SCRIPT=sanitize_mla.py FLASHKIT_MLA_PORTABLE=1 step memcheck_mla_portable sanitize memcheck
  SANITIZE_SCRIPT=sanitize_decode.py step synccheck_decode sanitize synccheck --quick
  SANITIZE_SCRIPT=sanitize_bwd.py step synccheck_bwd sanitize synccheck --quick
  SANITIZE_SCRIPT=sanitize_mla.py step synccheck_mla sanitize synccheck --quick
else
  skip sanitize "--skip-sanitize"
fi

if [ "$RUN_BENCH" -eq 1 ]; then
  step bench bench
else
  skip bench "--skip-bench"
fi

echo
echo "=== summary ($OUT_DIR)"
cat "$SUMMARY"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "FAILED: ${FAILED[*]}"
  exit 1
fi
echo "all steps passed"
