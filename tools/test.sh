#!/usr/bin/env bash
# The test command of the README: sets up .venv (if needed), builds the core with its C and kernel tests
# (ctest), installs both Python packages and runs pytest. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

ML_BUILD_CUDA=${ML_BUILD_CUDA:-OFF} bash tools/setup.sh

# shellcheck disable=SC1091
. .venv/bin/activate

echo "== lint (ruff)"
ruff check python-shared python-torch python-mlx tests benchmarks tools
ruff format --check python-shared python-torch python-mlx tests benchmarks tools

echo "== C API, kernels and Metal-dialect check (ctest)"
if ! command -v clang-14 >/dev/null 2>&1; then
  echo "clang-14 is missing: the static Metal-dialect check cannot run (apt-get install clang-14)" >&2
  exit 1
fi
# ML_BUILD_CUDA=AUTO: where nvcc exists (CI's machines have it, no GPU) the CUDA entry points are compiled too,
# so the CUDA dialect cannot rot unnoticed; the CUDA tests themselves need a GPU (tests/python/cuda).
cmake -S . -B build/test -G Ninja -DML_BUILD_TESTS=ON -DML_BUILD_CUDA=AUTO -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$root/.venv/bin/python" >/dev/null
cmake --build build/test -j "$jobs"
ctest --test-dir build/test --output-on-failure -j "$jobs"

echo "== C API and kernel tests under ASan+UBSan (Debug build of the core)"
# Every finding fails the test (-fno-sanitize-recover, halt_on_error); leaks are checked at exit.
# CPU only: the sanitizers cover the core, the C API and the kernels' CPU builds; the Metal-dialect
# check needs no second run. The long kernel-logic sweeps that run in Release above (the simdgroup
# kernels' family sweeps and the global-launch sizes past the shared window) are left out here, to keep
# the whole command well under 30 minutes on 2 cores (with them the ASan tests took 7.9 minutes of wall
# time); every table line, the simdgroup ones included, still runs under ASan in kernels_kernel_table.
# Of the blocked algorithms' suites only QR (the shared steps, products and panels), the T factor
# (larft) and the tridiagonal solver's short suites (tgk, limits) run here, for the same reason;
# the others run in Release above.
cmake -S . -B build/asan -G Ninja -DML_BUILD_TESTS=ON -DML_BUILD_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
  -DML_SANITIZE=ON -DPython_EXECUTABLE="$root/.venv/bin/python" >/dev/null
cmake --build build/asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" \
    -E "check_metal|metal_host|table_targets|kernels_eigh_simd|kernels_svd_simd|kernels_kernel_table_global|kernels_blocked_(gemm|sytrd|eigh|brd|svdref|svd|tridiag_values|tridiag_vectors|tridiag_subset|tridiag_dc|band|eigvalsh2|qr_tsqr)$"

echo "== Python tests (pytest)"
set +e
(cd tests && python -m pytest python -q -p no:cacheprovider "$@")
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: treating as failure" >&2
  exit 1
fi
exit "$rc"
