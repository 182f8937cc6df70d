#!/usr/bin/env bash
# Builds everything and runs every test: the CUDA library (SASS for sm_80 and sm_90a,
# PTX for compute_80), the C++ tests, the Python extension (installed with pip, which
# is what users run), then CTest and pytest. GPU tests skip cleanly without a GPU.
#
#   ./scripts/test.sh            # from the repository root
#   PYTHON=python3.12 BUILD_DIR=build/dev ./scripts/test.sh
#
# Needs: CUDA toolkit (nvcc), CMake >= 3.25, ninja, a C++17 compiler, GoogleTest, and
# the Python packages nanobind, scikit-build-core, numpy, pytest (no downloads happen
# here: --no-build-isolation, so it also works offline).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-build/test}

echo "== build + install (pip, build dir $BUILD_DIR)"
"$PYTHON" -m pip install --no-build-isolation --no-deps -q \
  -Cbuild-dir="$BUILD_DIR" -Ccmake.define.FLASHKIT_BUILD_TESTS=ON .

echo "== C++ tests (CTest)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2

echo "== Python tests (pytest; GPU tests skip without a GPU)"
# Run from tests/ so the installed package, not the source tree, is imported.
(cd tests/python && "$PYTHON" -m pytest -q -ra "$@")
