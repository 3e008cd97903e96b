#!/usr/bin/env bash
# One call on the GPU machine for the small and mid-size matrices: the torch package built
# elsewhere with the CUDA backend for sm_90 (pip install --target SITE ./python-torch
# -C cmake.define.ML_BUILD_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real), carried
# along with .whl (the scipy_openblas32 wheel); then the CUDA tests of the svd kernels and
# benchmarks/small_n_ab.py (routing variants against torch.linalg, CuPy and JAX). Results to $OUT.
#   SITE=path/to/site bash benchmarks/h200_small.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
SITE=${SITE:-.site}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/scipy_openblas32-*.whl || exit 1
rm -rf /tmp/site/metal_linalg_torch && cp -r "$SITE/metal_linalg_torch" /tmp/site/ || exit 1
export PYTHONPATH=/tmp/site
python3 -c 'import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)' \
  || { echo "no usable CUDA backend"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
rc=0
timeout "${TESTS_S:-70}" python3 -m pytest tests/python/cuda/test_cuda_ops.py -k "svd" -q \
  -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -15
rc=$(( rc | PIPESTATUS[0] ))
timeout "${BENCH_S:-95}" python3 benchmarks/small_n_ab.py --out "$OUT" \
  --budget-s "${PEERS_S:-70}" 2>&1 | tee "$OUT/bench.log"
rc=$(( rc | PIPESTATUS[0] ))
exit $rc
