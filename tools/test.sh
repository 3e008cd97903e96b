#!/usr/bin/env bash
# The test command of the README: sets up .venv (if needed), builds the core with its C and kernel tests
# (ctest), installs both Python packages and runs pytest. Exits non-zero on any failure. Each phase ends with a
# line "-- <phase>: <seconds> s" and the command ends with all of them, so slow phases show in every CI log.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

phase_name="" phase_start=$(date +%s) timings=""
phase() {
  local now
  now=$(date +%s)
  if [ -n "$phase_name" ]; then
    echo "-- $phase_name: $((now - phase_start)) s"
    timings+="$phase_name $((now - phase_start)) s; "
  fi
  phase_name=$1 phase_start=$now
  [ -n "$1" ] && echo "== $1"
  return 0
}
start=$(date +%s)
trap 'phase ""; echo "== phase times: ${timings}total $(($(date +%s) - start)) s"' EXIT

phase "setup (.venv, both packages)"
# The static Metal-dialect check needs clang-14; only this command does, so only it installs it.
if ! command -v clang-14 >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing clang-14 (Metal dialect check)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14) >/dev/null 2>&1 \
    || echo "warning: could not install clang-14" >&2
fi
# The packages keep the CUDA backend where a CUDA GPU is usable (tools/setup.sh decides), so the CUDA and
# MLX-GPU tests below run there; elsewhere the CUDA sources are compiled once, for ctest (below).
bash tools/setup.sh

# shellcheck disable=SC1091
. .venv/bin/activate
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

phase "lint (ruff)"
ruff check python-shared python-torch python-mlx tests benchmarks tools
ruff format --check python-shared python-torch python-mlx tests benchmarks tools

if ! command -v clang-14 >/dev/null 2>&1; then
  echo "clang-14 is missing: the static Metal-dialect check cannot run (apt-get install clang-14)" >&2
  exit 1
fi
# ML_BUILD_CUDA=AUTO: where nvcc exists (CI's machines have it, no GPU) the CUDA entry points are compiled too,
# so the CUDA dialect cannot rot unnoticed; the CUDA tests themselves need a GPU (tests/python/cuda). Without
# a GPU that build is a compile check only: PTX for one architecture (90-virtual), no machine code, which
# takes the kernels' 6.5-minute nvcc step (three targets, two ptxas runs) out of the build's critical path;
# the GPU machine's builds compile the machine code (benchmarks/h200_*.sh).
cuda_archs=()
if ! grep -q '^GPU' <<<"$(nvidia-smi -L 2>/dev/null || true)"; then
  cuda_archs=(-DCMAKE_CUDA_ARCHITECTURES=90-virtual)
fi
# ASan+UBSan build (Debug build of the core).
# Every finding fails the test (-fno-sanitize-recover, halt_on_error); leaks are checked at exit.
# CPU only: the sanitizers cover the core, the C API and the kernels' CPU builds; the Metal-dialect
# check needs no second run. The long kernel-logic sweeps that run in Release below (the simdgroup
# kernels' family sweeps, the global-launch sizes past the shared window and the SVD kernel's square
# sweep, which alone took 825 of the 1136 s of ASan tests in an earlier CI run) are left out here, to
# shorten the whole command on 2 cores; every table line, the simdgroup ones included, still runs under
# ASan in kernels_kernel_table, and the SVD kernel in its shapes, limits and bisect suites.
# Of the blocked algorithms' suites only QR (the shared steps, products and panels, and the split
# columns), the T factor (larft) and the tridiagonal solver's short suites (tgk, limits) run here,
# for the same reason; the others (among them QR's panels over many groups, fused and in
# registers: qr_tsqr, qr_fused, qr_reg) run in Release below. Only the programs of the tests
# that run are built.
asan_skip="check_metal|metal_host|table_targets|kernels_eigh_simd|kernels_svd_simd|kernels_svd_square"
asan_skip+="|kernels_kernel_table_global|kernels_blocked_(gemm|sytrd|eigh|brd|svdref|svd|tridiag_values"
asan_skip+="|tridiag_vectors|tridiag_subset|tridiag_dc|band|eigvalsh2|chase|eigh2|qr_tsqr|qr_fused"
asan_skip+="|qr_reg|linsys_solve)$"  # the blocked linear systems but solve run here

phase "Release build (core, C and kernel tests; the ASan+UBSan build alongside)"
cmake -S . -B build/test -G Ninja -DML_BUILD_TESTS=ON -DML_BUILD_CUDA=AUTO -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$root/.venv/bin/python" ${launcher[@]+"${launcher[@]}"} \
  ${cuda_archs[@]+"${cuda_archs[@]}"} >/dev/null
# Debug information: line tables only (-g1), all the sanitizers' reports need for file:line in
# every frame; full -g costs more compile time (tests/kernels/test_qr_small.cpp: 50 s of CPU with
# -g, 35 s with -g1).
cmake -S . -B build/asan -G Ninja -DML_BUILD_TESTS=ON -DML_BUILD_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DML_SANITIZE=ON \
  -DPython_EXECUTABLE="$root/.venv/bin/python" ${launcher[@]+"${launcher[@]}"} >/dev/null
read -r -a asan_targets <<<"$(python tools/ctest_targets.py build/asan "$asan_skip")"
# The ASan build runs alongside the Release build and its ctest at the lowest CPU priority: it takes
# the cores where they would idle (a long compile alone at the end of a build, tests that wait), and
# all of them once they are done. Its own process group (job control), so that an early exit stops
# it; its output is shown when it has finished.
asan_log="$root/build/asan-build.log"
stop_asan_build() {
  if [ -n "${asan_pid:-}" ]; then kill -- -"$asan_pid" 2>/dev/null || true; fi
}
set -m
(
  t0=$(date +%s)
  rc=0
  nice -n 19 cmake --build build/asan -j "$jobs" --target "${asan_targets[@]}" || rc=$?
  echo "-- ASan+UBSan build: $(($(date +%s) - t0)) s from its start (exit $rc)"
  exit "$rc"
) >"$asan_log" 2>&1 &
asan_pid=$!
set +m
trap 'stop_asan_build; phase ""; echo "== phase times: ${timings}total $(($(date +%s) - start)) s"' EXIT
cmake --build build/test -j "$jobs"
phase "ctest: C API, kernels and Metal-dialect check"
ctest --test-dir build/test --output-on-failure -j "$jobs"

phase "ASan+UBSan build (the rest of it)"
# Back to normal priority where allowed (root), so other work on the machine does not starve it.
renice -n 0 -g "$asan_pid" >/dev/null 2>&1 || true
asan_rc=0
wait "$asan_pid" || asan_rc=$?
asan_pid=""
cat "$asan_log"
if [ "$asan_rc" -ne 0 ]; then
  echo "the ASan+UBSan build failed (exit $asan_rc)" >&2
  exit 1
fi
phase "ctest under ASan+UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" -E "$asan_skip"

phase "pytest (torch, MLX, CUDA where a GPU exists)"
# Which GPU suites run here, and why the others skip (pytest -rs lists every skip with its reason).
python - <<'PY' || true
import importlib.util

lines = []
try:
    import torch
    from metal_linalg_torch import _lib

    built = bool(_lib.lib.ml_backend_available(b"cuda"))
    if torch.cuda.is_available() and built:
        lines.append("CUDA tests (tests/python/cuda, torch on the GPU): run")
    elif torch.cuda.is_available():
        lines.append("CUDA tests: SKIPPED, the package was built without the CUDA backend"
                     " (tools/setup.sh builds it where nvcc and a GPU exist; ML_BUILD_CUDA=ON forces it)")
    else:
        lines.append("CUDA tests: SKIPPED, torch sees no CUDA device")
except Exception as e:  # the tests themselves report a broken install
    lines.append(f"CUDA tests: cannot tell ({e})")
if importlib.util.find_spec("mlx") is not None:
    import mlx.core as mx

    if mx.is_available(mx.gpu):
        lines.append("MLX GPU-stream tests: run")
    else:
        lines.append("MLX GPU-stream tests: SKIPPED, this MLX has no GPU backend (mlx[cpu])")
print("\n".join(lines))
PY
set +e
(cd tests && python -m pytest python -q -p no:cacheprovider "$@")
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: treating as failure" >&2
  exit 1
fi
exit "$rc"
