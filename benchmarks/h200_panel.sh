#!/usr/bin/env bash
# One GPU-machine call (device tool, carry [".site", ".whl"]) for blocked eigh's one-launch panels
# (trd_panel): the prebuilt torch package (benchmarks/h200_site.sh), the blocked CUDA eig tests
# with every panel in one launch, benchmarks/sytrd_bench.py over the panel variants and the
# per-step launches, then benchmarks/profile_steps.py at 2048 and 4096. Logs and sytrd.jsonl go
# to $OUT.   PANEL=264 VSHAPES=2048x1,4096x1 bash benchmarks/h200_panel.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# shellcheck disable=SC1091
. benchmarks/h200_site.sh
J="$OUT/sytrd.jsonl"
PANEL=${PANEL:-264}
METAL_LINALG_TRD_PANEL_GROUPS=$PANEL timeout "${PYTEST_S:-60}" python3 -m pytest \
  tests/python/cuda/test_cuda_blocked.py tests/python/cuda/test_cuda_large_accuracy.py -q -k eig \
  -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -8
rc=${PIPESTATUS[0]}
echo "== tests done after $SECONDS s"
timeout "${BENCH_S:-120}" python3 benchmarks/sytrd_bench.py --label nb32 --variants \
  --vshapes "${VSHAPES:-1024x1,2048x1,4096x1,1024x8,512x64}" \
  --vnames "${VNAMES:-default,panel66,panel132,panel264,panel528,panel264r64,panel132l512}" \
  --out "$J" 2>&1 | tee "$OUT/bench.log"
echo "== variants done after $SECONDS s"
METAL_LINALG_TRD_PANEL_GROUPS=$PANEL timeout 30 python3 benchmarks/profile_steps.py \
  eigh:2048x2048x1 eigh:4096x4096x1 eigvalsh:4096x4096x1 2>&1 | tee "$OUT/profile_steps.log"
echo "== all done after $SECONDS s"
exit $rc
