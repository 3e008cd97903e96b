#!/usr/bin/env bash
# Creates .venv with everything the packages, the benchmark and the tests need, then builds and installs both
# packages (metal-linalg for MLX, metal-linalg-torch for PyTorch) from this checkout. The core is compiled once:
# both packages build in build/wheel (the second reuses the first's objects, and a later run reuses both).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
echo "== installing dependencies into .venv"
python -m pip install -q -r requirements-dev.txt

# The CUDA backend only where it can run: nvcc and a CUDA GPU (nvidia-smi lists one), unless ML_BUILD_CUDA
# says otherwise (ON: build it regardless, e.g. to compile-check on a machine without a GPU; OFF: never).
cuda=${ML_BUILD_CUDA:-}
if [ -z "$cuda" ]; then
  if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    cuda=OFF why="no nvcc"
  elif ! grep -q '^GPU' <<<"$(nvidia-smi -L 2>/dev/null || true)"; then
    cuda=OFF why="nvcc but no usable CUDA GPU (nvidia-smi lists none); ML_BUILD_CUDA=ON builds it anyway"
  else
    cuda=ON why="nvcc and a CUDA GPU"
  fi
else
  why="ML_BUILD_CUDA=$cuda"
fi
args=(-q --no-build-isolation -C build-dir="$root/build/wheel" -C cmake.define.ML_BUILD_CUDA="$cuda")
if command -v ccache >/dev/null 2>&1; then
  args+=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# Where the CUDA backend is built (a CUDA GPU is usable), MLX with its CUDA backend too, so that the MLX
# package's GPU-stream tests run here; mlx[cpu] (requirements-dev.txt) stays where that install fails (e.g. no
# network). The two MLX backends are separate wheels that install the same files: one at a time.
mlx_version=$(python -c 'import importlib.metadata as m; print(m.version("mlx"))')
if [ "$cuda" = ON ] && [ "$(uname -s)" = Linux ] && ! python -c 'import mlx.core as mx, sys
sys.exit(0 if mx.is_available(mx.gpu) else 1)' 2>/dev/null; then
  echo "== MLX with its CUDA backend (mlx[cuda13]==$mlx_version) for the MLX GPU-stream tests"
  python -m pip uninstall -q -y mlx-cpu
  if ! python -m pip install -q "mlx[cuda13]==$mlx_version"; then
    echo "warning: could not install mlx[cuda13]; keeping mlx[cpu] (the MLX GPU-stream tests will skip)" >&2
    python -m pip install -q "mlx[cpu]==$mlx_version"
  fi
fi
echo "== building and installing metal-linalg-torch and metal-linalg (CUDA backend $cuda: $why)"
python -m pip install "${args[@]}" ./python-torch
python -m pip install "${args[@]}" .
