#!/usr/bin/env bash
# One call on the GPU machine for blocked eigh's one-stage tridiagonalisation: install the carried
# wheel (.whl-sytrd/, built here with the CUDA backend for sm_90) or build there, the blocked CUDA
# eig tests, benchmarks/sytrd_bench.py (the per-column variants at nb = 32, the grid with the
# fastest of them and the peers, a few variants at nb = 64), then benchmarks/profile_steps.py at
# 2048 with the old layout and the new one. Logs and sytrd.jsonl go to $OUT.
#   bash benchmarks/h200_sytrd.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
install_or_build .whl-sytrd 90-real
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
J="$OUT/sytrd.jsonl"
old="METAL_LINALG_TRD_LANES=128 METAL_LINALG_TRD_ROWS=0 METAL_LINALG_TRD_SYMV_PER=-1"
timeout "${PYTEST_S:-40}" python3 -m pytest tests/python/cuda/test_cuda_blocked.py -q -k eig \
  -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -8
rc=${PIPESTATUS[0]}
echo "== tests done after $SECONDS s"
timeout 35 python3 benchmarks/sytrd_bench.py --label nb32 --variants --out "$J" 2>&1 |
  tee "$OUT/bench.log"
echo "== variants done after $SECONDS s"
timeout 55 python3 benchmarks/sytrd_bench.py --label ours --grid --peers --best "$J" --out "$J" \
  2>&1 | tee -a "$OUT/bench.log"
echo "== grid done after $SECONDS s"
METAL_LINALG_BLOCKED_NB=64 timeout 15 python3 benchmarks/sytrd_bench.py --label nb64 --variants \
  --vshapes 2048x1,4096x1,1024x8 --vnames old,default,per4 --out "$J" 2>&1 | tee -a "$OUT/bench.log"
echo "== nb64 done after $SECONDS s"
env $old timeout 12 python3 benchmarks/profile_steps.py eigh:2048x2048x1 2>&1 |
  tee "$OUT/profile_steps.log"
timeout 14 python3 benchmarks/profile_steps.py eigh:2048x2048x1 eigh:4096x4096x1 2>&1 |
  tee -a "$OUT/profile_steps.log"
echo "== all done after $SECONDS s"
exit $rc
