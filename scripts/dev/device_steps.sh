# Shared by the scripts/dev/validate_*.sh runs on the GPU machine (sourced, not run): the
# build environment and `step NAME LIMIT CMD...`, which runs CMD with a time limit, logs it
# to $O/NAME.log and appends "ok"/"FAIL" (with the log's tail) to $O/summary.txt.
# The caller sets O (its output folder) first.
mkdir -p "$O"
: > "$O/summary.txt"
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
