#!/usr/bin/env bash
# One GPU-machine call for the blocked QR's fused panels: the torch package built there (timed),
# the variants of benchmarks/qr_panels.py (VARIANTS, at POINTS) against torch.linalg, a step
# profile (PROFILE), then the CUDA QR tests (blocked, large hard families). Each phase is
# bounded so that the whole stays within BUDGET seconds (default 190). Logs into $OUT.
#   bash benchmarks/h200_qr_fused.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
BUDGET=${BUDGET:-190}
VARIANTS=${VARIANTS:-fused,torch,baseline,fused_outer1,fused_outer1_notsqr,fused_notsqr,fused_gramlarft,fused_l512}
POINTS=${POINTS:-1024x1024x1,2048x2048x1,4096x4096x1,4096x1024x1,3000x500x1,512x1024x1,1024x1024x8,512x512x64,256x256x1,512x512x1,1024x512x1}
PROFILE=${PROFILE:-qr:1024x1024x1 qr:4096x4096x1}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
left() { local r=$((BUDGET - SECONDS - $1)); echo $((r > 5 ? r : 5)); }
site=/tmp/site
mkdir -p "$site"
for w in ../../.whl/*.whl .whl/*.whl; do
  [ -f "$w" ] && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$w"
done
b0=$SECONDS
if [ -f .devlib/libmetal_linalg.so ]; then  # a core library prebuilt for sm_90
  echo "== prebuilt core library"
  cp -r python-torch/metal_linalg_torch "$site/"
  cp -r python-shared/_shared "$site/metal_linalg_torch/_shared"
  cp .devlib/libmetal_linalg.so "$site/metal_linalg_torch/"
else
  echo "== building the torch package"
  CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install -q --no-build-isolation --no-deps \
    --target "$site" ./python-torch -C cmake.define.ML_BUILD_CUDA=ON \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real -C build-dir=/tmp/b \
    -C build.tool-args=-j16 2>&1 | tail -20
fi
echo "== ready after $((SECONDS - b0)) s"
export PYTHONPATH=$site
python3 -c 'import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)' ||
  { echo "CUDA backend unusable"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout "$(left 70)" python3 benchmarks/qr_panels.py --out "$OUT" --slug nvidia-h200-qr-fused \
  --only "$VARIANTS" --points "$POINTS" 2>&1 | tee "$OUT/bench.log"
echo "== bench done after ${SECONDS} s"
timeout "$(left 55)" python3 benchmarks/profile_steps.py $PROFILE 2>&1 | tee "$OUT/profile.log"
echo "== profile done after ${SECONDS} s"
timeout "$(left 30)" python3 -m pytest tests/python/cuda/test_cuda_blocked.py -k qr -q -x \
  -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/pytest_blocked.log" | tail -6
echo "== blocked tests done after ${SECONDS} s"
timeout "$(left 0)" python3 -m pytest tests/python/cuda/test_cuda_large_accuracy.py -k qr -q \
  -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/pytest_large.log" | tail -8
echo "== all done after ${SECONDS} s"
