#!/usr/bin/env bash
# metal_linalg (MLX package) on an NVIDIA GPU with MLX's CUDA flavour, run from the repository root:
#   bash benchmarks/h200_mlx.sh WHEEL_DIR OUT_DIR
# WHEEL_DIR holds mlx-0.32.4 (cp312), mlx_cuda_13-0.32.4 and nanobind-3.1.0 wheels, and
# optionally scipy_openblas32 and a metal_linalg_torch wheel built with the CUDA backend.
# Steps: install the wheels into /tmp/site; build and install this package against that MLX
# (CUDA flavour, core with its CUDA backend, sm_90); run the MLX tests on the GPU stream (the
# default device there), once as routed and once with every covered shape forced onto the CUDA
# kernels (H200_MLX_FORCED=0 leaves that run out), and the CUDA tests once more with
# METAL_LINALG_MLX_CUDA_LAUNCH=direct (H200_MLX_TESTS=0 leaves all test runs out); time eigh of
# 16384 8x8 and 1024 64x64 and break an MLX call's time down (benchmarks/h200_mlx_bench.py:
# mlx_gpu_eigh.* and mlx_gpu_call_breakdown.*; H200_MLX_BENCH=0 leaves it out). H200_MLX_TEST_PATHS:
# the test files of the routed run (default: tests/python/mlx). Logs, JSON and Markdown go to OUT_DIR. Exit status: non-zero if the build or any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
WHL=${1:?usage: bash benchmarks/h200_mlx.sh WHEEL_DIR OUT_DIR}
OUT=${2:?usage: bash benchmarks/h200_mlx.sh WHEEL_DIR OUT_DIR}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
SITE=/tmp/site
export PYTHONPATH=$SITE

echo "== installing MLX (CUDA flavour) and nanobind into $SITE"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" \
  "$WHL"/mlx-0.32.4-*.whl "$WHL"/mlx_cuda_13-0.32.4-*.whl "$WHL"/nanobind-3.1.0-*.whl || exit 1
for extra in "$WHL"/scipy_openblas32-*.whl "$WHL"/metal_linalg_torch-*.whl "$WHL"/nvidia_*.whl; do
  [ -e "$extra" ] && python3 -m pip install -q --no-index --no-deps --no-compile --upgrade \
    --target "$SITE" "$extra"
done
# libmlx finds cuBLAS, cuDNN, NCCL, cuFFT, cuSOLVER and NVRTC through $ORIGIN/../../nvidia/*/lib,
# i.e. in $SITE/nvidia. Without their wheels in WHEEL_DIR, use the ones torch brought.
if [ ! -e "$SITE/nvidia" ]; then
  nv=$(env -u PYTHONPATH python3 -c 'import nvidia, os; print([p for p in nvidia.__path__ if os.path.isdir(p)][0])' 2>/dev/null)
  [ -n "$nv" ] && ln -s "$nv" "$SITE/nvidia" && echo "using CUDA libraries from $nv"
fi
python3 -c 'import mlx.core as mx; print("MLX", mx.__version__, "gpu:", mx.is_available(mx.gpu))' \
  | tee "$OUT/env.log"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee -a "$OUT/env.log"

echo "== building metal-linalg (MLX, CUDA flavour, sm_90) against $SITE"
rm -rf "$SITE/metal_linalg" build/h200-mlx
python3 -m pip install -v --upgrade --no-build-isolation --no-deps --target "$SITE" . \
  -C build-dir=build/h200-mlx \
  -C cmake.define.ML_BUILD_CUDA=ON -C cmake.define.ML_MLX_FLAVOUR=cuda \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real >"$OUT/build.log" 2>&1
build_rc=$?
tail -5 "$OUT/build.log"
if [ "$build_rc" -ne 0 ]; then
  echo "build failed (see $OUT/build.log)"
  exit 1
fi
python3 -c 'import metal_linalg as ml; print("gpu_path:", ml.gpu_path(), ml.device_name())' \
  | tee -a "$OUT/env.log"
if ! python3 -c 'import metal_linalg_torch' 2>/dev/null; then
  echo "== building metal-linalg-torch (CUDA, sm_90) for the comparison"
  CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90-real" python3 -m pip install -q --no-build-isolation \
    --no-deps --target "$SITE" ./python-torch >"$OUT/build_torch.log" 2>&1 \
    || echo "torch package build failed: the benchmark reports n/a for it"
fi

rc=0
if [ "${H200_MLX_TESTS:-1}" = 0 ]; then
echo "== (H200_MLX_TESTS=0: the test runs left out)"
else
echo "== MLX tests on the GPU stream (default device), as routed"
# shellcheck disable=SC2086
timeout 900 python3 -m pytest ${H200_MLX_TEST_PATHS:-tests/python/mlx} -q -p no:cacheprovider -o addopts="" \
  --continue-on-collection-errors 2>&1 | tee "$OUT/pytest_mlx_gpu.log" | tail -30
rc=$((rc | PIPESTATUS[0]))
if [ "${H200_MLX_FORCED:-1}" = 0 ]; then
  echo "== (H200_MLX_FORCED=0: the forced run left out)"
else
echo "== MLX tests with every shape a CUDA kernel covers forced onto it"
METAL_LINALG_QR_BACKEND=gpu METAL_LINALG_EIGH_BACKEND=gpu METAL_LINALG_EIGVALSH_BACKEND=gpu \
  METAL_LINALG_SVD_BACKEND=gpu METAL_LINALG_SVDVALS_BACKEND=gpu \
  timeout 900 python3 -m pytest tests/python/mlx -q -p no:cacheprovider -o addopts="" --continue-on-collection-errors \
  -k "accuracy or grad or primitive or cuda or ops" 2>&1 | tee "$OUT/pytest_mlx_gpu_forced.log" \
  | tail -30
rc=$((rc | PIPESTATUS[0]))
fi
echo "== MLX CUDA tests with METAL_LINALG_MLX_CUDA_LAUNCH=direct (every launch straight onto MLX's stream)"
METAL_LINALG_MLX_CUDA_LAUNCH=direct timeout 600 python3 -m pytest tests/python/mlx/test_mlx_cuda.py \
  tests/python/mlx/test_mlx_primitive.py -q -p no:cacheprovider -o addopts="" \
  2>&1 | tee "$OUT/pytest_mlx_gpu_direct.log" | tail -15
rc=$((rc | PIPESTATUS[0]))
fi

if [ "${H200_MLX_BENCH:-1}" = 0 ]; then
  echo "== (H200_MLX_BENCH=0: the eigh timing left out)"
else
echo "== eigh timing: MLX GPU stream vs torch package CUDA vs mx.linalg CPU stream"
timeout 600 python3 benchmarks/h200_mlx_bench.py --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -40
rc=$((rc | PIPESTATUS[0]))
fi
exit "$rc"
