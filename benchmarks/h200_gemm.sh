#!/usr/bin/env bash
# One call on the GPU machine for the blocked algorithms' product: the library (a prebuilt
# libmetal_linalg.so in $PREBUILT, else built here for sm_90), the CUDA product test, the product
# benchmark (benchmarks/gemm_bench.py) and the blocked algorithms' CUDA tests through cuBLAS and
# through the dialect step. Logs and results go to $OUT.
#   PREBUILT=.prebuilt bash benchmarks/h200_gemm.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT" /tmp/site
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
rm -rf /tmp/site/metal_linalg_torch
cp -r python-torch/metal_linalg_torch /tmp/site/
cp -r python-shared/_shared /tmp/site/metal_linalg_torch/_shared
if [ -n "${PREBUILT:-}" ] && ls "$PREBUILT"/libmetal_linalg.so* >/dev/null 2>&1; then
  cp -a "$PREBUILT"/libmetal_linalg.so* /tmp/site/metal_linalg_torch/
else
  cmake -S . -B /tmp/build -G Ninja -DML_BUILD_CUDA=ON -DML_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
    cmake --build /tmp/build --target metal_linalg -j16 2>&1 | tail -3 &&
    cp -a /tmp/build/core/libmetal_linalg.so* /tmp/site/metal_linalg_torch/ || exit 1
fi
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -c 'import metal_linalg_torch as m; l = m._lib.lib; print("cuda", l.ml_backend_available(b"cuda"), "cublas", l.ml_cuda_cublas_available())'
rc=0
timeout 60 python3 -m pytest tests/python/cuda/test_cuda_gemm.py -q -p no:cacheprovider \
  -o addopts="" 2>&1 | tee "$OUT/pytest_gemm.log" | tail -15
rc=$(( rc | PIPESTATUS[0] ))
timeout 60 python3 benchmarks/gemm_bench.py --out "$OUT" 2>&1 | tee "$OUT/bench.log"
rc=$(( rc | PIPESTATUS[0] ))
# The blocked algorithms end to end, products by cuBLAS and by the dialect step.
cat > /tmp/ops_time.py <<'PY'
import os, time, torch, metal_linalg_torch as mlt
torch.manual_seed(0)
impl = os.environ.get("METAL_LINALG_CUDA_GEMM", "default")
for op, n in (("qr", 4096), ("eigh", 2048), ("svd", 2048)):
    a = torch.randn(n, n, device="cuda")
    if op == "eigh":
        a = a + a.mT
    f = getattr(mlt, op)
    f(a); torch.cuda.synchronize()
    ts = []
    for _ in range(3):
        t = time.perf_counter(); f(a); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
    print(f"{impl:8s} {op} {n}x{n} x1: best {1e3 * min(ts):.1f} ms", flush=True)
PY
for impl in cublas dialect; do
  METAL_LINALG_CUDA_GEMM=$impl timeout "${BLOCKED_S:-25}" python3 -m pytest \
    tests/python/cuda/test_cuda_blocked.py -q -x -p no:cacheprovider -o addopts="" \
    2>&1 | tee "$OUT/pytest_blocked_$impl.log" | tail -6
  rc=$(( rc | PIPESTATUS[0] ))
  METAL_LINALG_CUDA_GEMM=$impl timeout "${OPS_S:-20}" python3 /tmp/ops_time.py 2>&1 |
    grep -v Warning | tee -a "$OUT/ops.log"
done
exit $rc
