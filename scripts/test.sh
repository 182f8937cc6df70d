#!/usr/bin/env bash
# Builds everything and runs every test: the CUDA library (SASS for sm_80 and sm_90a,
# PTX for compute_80), the C++ tests, the Python extension (installed with pip, which
# is what users run), then CTest and pytest. GPU tests skip cleanly without a GPU.
#
#   ./scripts/test.sh            # from the repository root
#   PYTHON=python3.12 BUILD_DIR=build/dev ./scripts/test.sh
#   ./scripts/test.sh --check-gtest   # only: exit 0 if GoogleTest is installed, else 1
#
# Needs: CUDA toolkit (nvcc), CMake >= 3.25, ninja, a C++17 compiler, GoogleTest
# (Debian/Ubuntu: apt-get install libgtest-dev; .ci/run installs it when missing), and
# the Python packages nanobind, scikit-build-core, numpy, pytest (no downloads happen
# here: --no-build-isolation, so it also works offline).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-build/test}

# GoogleTest as CMake's find_package(GTest) finds it: headers and a library in the usual
# prefixes (/usr, /usr/local, or GTEST_ROOT).
have_gtest() {
  local prefix
  for prefix in ${GTEST_ROOT:-} /usr /usr/local; do
    [ -f "$prefix/include/gtest/gtest.h" ] || continue
    if compgen -G "$prefix/lib/libgtest.*" >/dev/null || compgen -G "$prefix/lib64/libgtest.*" >/dev/null ||
       compgen -G "$prefix/lib/*/libgtest.*" >/dev/null; then
      return 0
    fi
  done
  return 1
}
if [ "${1:-}" = "--check-gtest" ]; then
  have_gtest
  exit $?
fi
if ! have_gtest; then
  echo "scripts/test.sh: GoogleTest not found (the C++ tests need it)." >&2
  echo "  Debian/Ubuntu: apt-get install libgtest-dev   (.ci/run does this when missing)" >&2
  exit 1
fi

echo "== build + install (pip, build dir $BUILD_DIR)"
"$PYTHON" -m pip install --no-build-isolation --no-deps -q \
  -Cbuild-dir="$BUILD_DIR" -Ccmake.define.FLASHKIT_BUILD_TESTS=ON .

echo "== C++ tests (CTest)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2

echo "== Python tests (pytest; GPU tests skip without a GPU)"
# Run from tests/ so the installed package, not the source tree, is imported.
(cd tests/python && "$PYTHON" -m pytest -q -ra "$@")
