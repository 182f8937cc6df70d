# Sourced by the SASS checks that count per kernel in sm_90a code (check_sass_exp_loops.sh,
# check_sass_mla_arrive.sh). sass_check_report OUT SASS FILE BAD_HEADER NONE_FOUND OK:
# OUT is the scan's output, one line per failing kernel plus "checked N" and "sm90a N";
# SASS is the whole listing. Exits 1 with BAD_HEADER and the failing lines if there are any,
# or with NONE_FOUND if the file has sm_90a code but no kernel was checked; exits 0 with a
# note if the file has no sm_90a code, or with OK (" in N kernels of FILE" appended).
sass_check_report() {
  local out=$1 sass=$2 f=$3 bad h90 checked
  # (a scan that printed no count failed, e.g. its awk: an error, not "nothing to check"; the sm_90a count comes from
  # the listing itself, not from the scan)
  if ! grep -q '^checked [0-9]' <<< "$out"; then
    echo "the scan of $f printed no count: it failed" >&2
    exit 2
  fi
  bad=$(printf '%s\n' "$out" | grep -v '^checked \|^sm90a ')
  h90=$(printf '%s\n' "$sass" | grep -c -E '(arch|code for) *=? *sm_90a')
  checked=$(printf '%s\n' "$out" | sed -n 's/^checked //p')
  if [ -n "$bad" ]; then
    echo "$4"
    echo "$bad"
    exit 1
  fi
  if [ "${checked:-0}" = 0 ]; then
    if [ "${h90:-0}" = 0 ] && grep -q "arch = " <<< "$sass"; then
      echo "no sm_90a code in $f: nothing to check"
      exit 0
    fi
    echo "$5"
    exit 1
  fi
  echo "$6 in $checked kernels of $f"
  exit 0
}
