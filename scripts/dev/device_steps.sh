# Shared by the scripts/dev/validate_*.sh runs on the GPU machine (sourced, not run): the
# build environment and `step NAME LIMIT CMD...`, which runs CMD with a time limit, logs it
# to $O/NAME.log and appends "ok"/"FAIL" (with the log's tail) to $O/summary.txt.
# The caller sets O (its output folder) first.
mkdir -p "$O"
: > "$O/summary.txt"
export FLASHKIT_COMMIT=${FLASHKIT_COMMIT:-unknown}  # (the bench's CSV column)
# pack: $O as one .tgz under $OUT (the device tool brings back at most 8 files); a caller may define its own after
# sourcing this file.
pack() { tar -czf "${OUT:-/tmp}/$(basename "$O").tgz" -C "$(dirname "$O")" "$(basename "$O")"; }
export CPLUS_INCLUDE_PATH=${CPLUS_INCLUDE_PATH:-/usr/local/cuda/include/cccl}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16} PYTHONUNBUFFERED=1
S=/usr/local/cuda/bin/compute-sanitizer
step() {
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  if timeout "$limit" "$@" > "$O/$name.log" 2>&1; then
    echo "ok   $name $((SECONDS - t0))s" | tee -a "$O/summary.txt"
  else
    echo "FAIL $name (exit $?) $((SECONDS - t0))s" | tee -a "$O/summary.txt"
    tail -20 "$O/$name.log" >> "$O/summary.txt"
  fi
}
# install_cmd TREE: sets INSTALL to the pip install of TREE into the device's python, built
# incrementally in TREE/build/gpu (sm_90a only, no C++ tests): `step install 300 "${INSTALL[@]}"`.
install_cmd() {
  INSTALL=(python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir="$1/build/gpu"
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real -Ccmake.define.FLASHKIT_BUILD_TESTS=OFF "$1")
}
# install_tree TREE: the usual start of a device call: the GPU's name and $FLASHKIT_COMMIT (if set)
# into summary.txt, then `step install` of TREE (install_cmd).
install_tree() {
  install_cmd "$1"
  device_header
  step install 400 "${INSTALL[@]}"
}
# device_header: the GPU's name and $FLASHKIT_COMMIT (if set) into summary.txt.
device_header() {
  nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$O/summary.txt"
  if [ -n "${FLASHKIT_COMMIT:-}" ]; then echo "commit $FLASHKIT_COMMIT" | tee -a "$O/summary.txt"; fi
}
# install_old OLD: `step install_old` of another tree OLD (an older commit carried as e.g. .carry/old) into
# /tmp/oldpkg (pip --target, built in OLD/build/gpu): run it with PYTHONPATH=/tmp/oldpkg, this tree without.
# (It resets INSTALL to OLD's.)
install_old() {
  install_cmd "$1"
  step install_old 400 "${INSTALL[@]}" --target /tmp/oldpkg
}
# with_defines ORIG DEFS > FILE: ORIG with each of DEFS (';'-separated "MACRO VALUE" pairs;
# empty = none) prepended as a #define (the define-variant runs: decode_define_sweep.sh,
# fwd_define_ab.sh).
with_defines() {
  (IFS=';'; for d in $2; do [ -n "$d" ] && echo "#define $d"; done; unset IFS; cat "$1")  # (a subshell: IFS and d stay here)
}
# restore_inst ORIG FILE: puts an instantiation file (FILE, under <tree>/src/) back from ORIG after
# a define variant and deletes its objects under <tree>/build: the next device call's copy of the
# tree brings FILE back with its old modification time, so an incremental build would otherwise
# keep the variant's object (it did once, 2026-11-27: bwd.md "Lockstep and dQ first").
restore_inst() {
  cp "$1" "$2"
  find "${2%/src/*}/build" -name "$(basename "$2").o" -delete 2>/dev/null
  return 0
}
# sanitizer_steps SUFFIX ENV SCRIPT ARGS...: memcheck, racecheck and synccheck of `python3 SCRIPT ARGS` under ENV (a
# space-separated list of NAME=VALUE, may be empty), with PyTorch's caching allocator off, as steps TOOL_SUFFIX.
sanitizer_steps() {
  local suffix=$1 envs=$2 tool
  shift 2
  for tool in memcheck racecheck synccheck; do
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 step ${tool}_$suffix 150 env $envs $S --tool $tool --error-exitcode 1 python3 "$@"
  done
}
# mla_checks TREE: the MLA GPU tests (bf16 / fp16 and FP8 caches), then memcheck and synccheck of
# sanitize_mla.py --quick, as steps mla_tests / memcheck / synccheck.
mla_checks() {
  (cd /tmp && step mla_tests 300 python3 -m pytest -q -m gpu -n 6 -p no:cacheprovider \
    "$1/tests/python/test_mla_gpu.py" "$1/tests/python/test_mla_fp8_gpu.py")
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  step memcheck 200 $S --tool memcheck --error-exitcode 1 --print-limit 50 python3 "$1/scripts/sanitize_mla.py" --quick
  step synccheck 200 $S --tool synccheck --error-exitcode 1 --print-limit 50 python3 "$1/scripts/sanitize_mla.py" --quick
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
}
# define_variant TREE COPY DEFS INSTS PKG: a copy of TREE at COPY (no build/, no .git) with DEFS (as
# with_defines) prepended to the instantiation files INSTS (space-separated names) of the family in
# $VARIANT_INST_DIR (under src/kernels/; default fwd_sm90/inst), built and installed with pip --target
# PKG as `step install_<basename of PKG>` (run it with PYTHONPATH=PKG).
define_variant() {
  rm -rf "$2" && mkdir -p "$2" && (cd "$1" && tar --exclude=./build --exclude=./.git -cf - .) | tar -xf - -C "$2"
  local f idir="src/kernels/${VARIANT_INST_DIR:-fwd_sm90/inst}"
  for f in $4; do
    with_defines "$1/$idir/$f.cu" "$3" > "$2/$idir/$f.cu"
  done
  install_cmd "$2"
  step "install_$(basename "$5")" 400 "${INSTALL[@]}" --target "$5"
}
# mla_env_ab VAR TAG "V1 V2" ARGS: ROUNDS interleaved rounds of the bench's MLA rows (flashkit only) with VAR=V1, then
# VAR=V2, ... in the environment; step logs mla_<TAG><v>_<round>, outputs under $O/mla_<TAG><v>_<round>/; calls the
# caller's `pack` after each run.
mla_env_ab() {
  local var=$1 tag=$2 vals=$3 args=$4 r v
  for r in $(seq 1 ${ROUNDS:-2}); do
    for v in $vals; do
      (cd /tmp && step mla_${tag}${v}_$r 300 env $var=$v python3 -m flashkit.bench --op mla --impls flashkit \
        $args --out-dir "$O/mla_${tag}${v}_$r" --no-plot); pack
    done
  done
}
# inst_variants FILES VARIANTS [LIMIT]: for each NAME=DEFS of VARIANTS ('|'-separated; DEFS ';'-separated "MACRO VALUE"
# pairs, as with_defines; empty DEFS = the tree as it is), the instantiation files FILES (space-separated paths under
# <tree>/src/, one tree) with DEFS prepended, built and installed with pip --target /tmp/pkg_NAME as step build_NAME
# (run a variant with PYTHONPATH=/tmp/pkg_NAME); the files restored after (restore_inst). Sets VARIANT_NAMES to the
# names that built; calls the caller's `pack` after each build.
inst_variants() {
  local files=($1) f v name defs vs
  VARIANT_NAMES=()
  for f in "${files[@]}"; do cp "$f" "$O/$(basename "$f").orig"; done
  IFS='|' read -r -a vs <<< "$2"
  for v in "${vs[@]}"; do
    name=${v%%=*}; defs=${v#*=}
    for f in "${files[@]}"; do with_defines "$O/$(basename "$f").orig" "$defs" > "$f"; done
    install_cmd "${files[0]%/src/*}"
    step build_$name ${3:-300} "${INSTALL[@]}" --target /tmp/pkg_$name && VARIANT_NAMES+=("$name")
    pack
  done
  for f in "${files[@]}"; do restore_inst "$O/$(basename "$f").orig" "$f"; done
}
# save_insts FAMILY NAMES / set_insts VARIANT DEFS / restore_insts: define variants of several instantiation files of
# one family at once (src/kernels/FAMILY/inst/NAME.cu, in the tree this file sits in): save_insts keeps the originals
# under $O, set_insts writes them with DEFS (as with_defines) and builds the tree (`step build_VARIANT`),
# restore_insts puts them back.
save_insts() {
  INSTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/src/kernels/$1/inst"; INSTS_NAMES=$2
  local f; for f in $INSTS_NAMES; do cp "$INSTS_DIR/$f.cu" "$O/$f.orig"; done
}
set_insts() {
  local f; for f in $INSTS_NAMES; do with_defines "$O/$f.orig" "$2" > "$INSTS_DIR/$f.cu"; done
  install_cmd "${INSTS_DIR%/src/*}"; step "build_$1" "${3:-400}" "${INSTALL[@]}"
}
restore_insts() {
  local f; for f in $INSTS_NAMES; do restore_inst "$O/$f.orig" "$INSTS_DIR/$f.cu"; done
}
# repeat_tests NAME REPS FILE K: pytest -k K of FILE (a path) REPS times (-n 4, 120 s each), a line per run into
# summary.txt ("NAME run i: " and pytest's last line, then its FAILED lines): for failures that come and go.
repeat_tests() {
  local i
  for ((i = 1; i <= $2; i++)); do
    (cd "$(dirname "$3")" && timeout 120 python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider "$(basename "$3")" \
      -k "$4" > "$O/t_$1_$i.log" 2>&1)
    echo "$1 run $i: $(tail -1 "$O/t_$1_$i.log")" | tee -a "$O/summary.txt"
    grep "^FAILED" "$O/t_$1_$i.log" | cut -c1-150 >> "$O/summary.txt"
  done
}
# watchdog_start SECONDS / watchdog_stop: `pack` once after SECONDS in the background (so that a call cut off by the
# device tool's limit still brings back what was done); watchdog_stop ends it (a sleeping child would hold the device
# call open after the script's end).
watchdog_start() {
  (sleep "$1"; echo "watchdog pack at $1s" >> "$O/summary.txt"; pack) > /dev/null 2>&1 &
  WATCHDOG=$!
}
watchdog_stop() {
  pkill -P "$WATCHDOG" sleep 2>/dev/null; kill "$WATCHDOG" 2>/dev/null
  return 0
}
# tests_each FILE [K]: every test of FILE (a path; -k K if given) in its own pytest run from /tmp, each under
# TEST_LIMIT seconds (default 400), TESTS_P at once (default 3), with -rP (a test's printed lines show); logs under
# $O/each/, a line per test into summary.txt as it ends: PASS / SKIP / FAIL / TIMEOUT, seconds, id, and the test's last
# "cases passed" line if it printed one (the sanitize_*.py subprocess tests). For files too slow for one limit (the
# backward families file: 130-300 s a test).
tests_each() {
  local file=$1 k=${2:-} dir; dir=$(dirname "$1")
  mkdir -p "$O/each"
  (cd /tmp && python3 -m pytest -q -m gpu -p no:cacheprovider --collect-only "$file" ${k:+-k "$k"} 2>/dev/null |
    grep "::" > "$O/each/ids.txt")
  echo "$(wc -l < "$O/each/ids.txt") tests from $(basename "$file")${k:+ -k \"$k\"}" | tee -a "$O/summary.txt"
  _test_one() {
    local id=$1 n t0=$SECONDS rc r; n=$(echo "${id##*/}" | tr -c 'A-Za-z0-9_.-' '_')
    (cd /tmp && timeout "${TEST_LIMIT:-400}" python3 -m pytest -q -rP -m gpu -p no:cacheprovider "$id" \
      > "$O/each/$n.log" 2>&1)
    rc=$?
    case $rc in 0) r=PASS;; 124) r=TIMEOUT;; *) r=FAIL;; esac
    if [ $rc = 0 ] && ! tail -1 "$O/each/$n.log" | grep -q " passed"; then r=SKIP; fi  # (pytest's last line)
    echo "$r $((SECONDS - t0))s ${id##*/} $(grep -h 'cases passed' "$O/each/$n.log" | tail -1)" >> "$O/summary.txt"
  }
  export -f _test_one; export O TEST_LIMIT
  # (the collected ids are relative to the file's folder)
  sed "s#^#$dir/#" "$O/each/ids.txt" | xargs -P "${TESTS_P:-3}" -I{} bash -c '_test_one "$@"' _ {}
}
