#!/usr/bin/env bash
# Creates .venv with everything the packages, the benchmark and the tests need, then builds and installs both
# packages (metal-linalg for MLX, metal-linalg-torch for PyTorch) from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang-14 >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing clang-14 (Metal dialect check)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14) >/dev/null 2>&1 \
    || echo "warning: could not install clang-14" >&2
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
echo "== installing dependencies into .venv"
python -m pip install -q -r requirements-dev.txt
# The CUDA backend is built when nvcc is found (ML_BUILD_CUDA=AUTO); CI, which has no GPU, sets
# ML_BUILD_CUDA=OFF here to save the compile (tools/test.sh compiles the CUDA sources once for ctest).
cuda=${ML_BUILD_CUDA:-AUTO}
echo "== building and installing metal-linalg-torch and metal-linalg (ML_BUILD_CUDA=$cuda)"
python -m pip install -q --no-build-isolation ./python-torch -C cmake.define.ML_BUILD_CUDA="$cuda"
python -m pip install -q --no-build-isolation . -C cmake.define.ML_BUILD_CUDA="$cuda"
