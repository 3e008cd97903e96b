#!/usr/bin/env bash
# One GPU-machine call: the CUDA linear-system tests and the large-LU variants of one prebuilt
# torch package (SITE: a `pip install --target` of python-torch for sm_90, e.g. unpacked from a
# carried tarball), then the variants side by side with torch.linalg:
#   1. tests/python/cuda/test_cuda_linsys.py (the committed table; the blocked path, its leaves,
#      lookahead, fused panels and triangular solves a vector a lane among them),
#   2. benchmarks/profile_steps.py on lu_factor 1024 / 2048 / 4096 x1: the default (launches), the
#      fused narrow panels (fuse) and those with the triangular solves a vector a lane (fuselane),
#   3. benchmarks/linsys_ab.py: launches, fuse, fusela (with lookahead), lane, fuselane, fuselanela.
#   SITE=/tmp/site OUT=out bash benchmarks/h200_linsys_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH="${SITE:?SITE=path}:$PWD/benchmarks"
cuda_usable || { echo "no usable CUDA backend in $SITE"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
L=METAL_LINALG_LS_LU_LEAF A=METAL_LINALG_LS_LU_LOOKAHEAD
F=METAL_LINALG_LS_LU_FUSE T=METAL_LINALG_LS_TRSM_LANE
rc=0
timeout "${PYTEST_S:-170}" python3 -m pytest tests/python/cuda/test_cuda_linsys.py -q \
  -p no:cacheprovider --maxfail=20 -o addopts="" > "$OUT/pytest.log" 2>&1
rc=$?
tail -4 "$OUT/pytest.log"
echo "== tests done after $SECONDS s"
VARIANTS="launches:$L=0,$A=0;fuse:$F=1;fuselane:$F=1,$T=1" timeout "${PROFILE_S:-60}" \
  python3 benchmarks/profile_steps.py lu_factor:1024x1024x1 lu_factor:2048x2048x1 \
  lu_factor:4096x4096x1 > "$OUT/profile_steps.log" 2>&1
grep "==" "$OUT/profile_steps.log"
timeout "${AB_S:-150}" python3 benchmarks/linsys_ab.py --out "$OUT" --slug lu-ab --reps 5 \
  --peers torch --points lu_factor:1024:1 lu_factor:2048:1 lu_factor:4096:1 lu_factor:2048:8 \
  solve:4096:1:1 inv:2048:1 solve_triangular:4096:1:4096 --variant "launches:$L=0,$A=0" \
  --variant "fuse:$F=1" --variant "fusela:$F=1,$A=1" --variant "lane:$T=1" \
  --variant "fuselane:$F=1,$T=1" --variant "fuselanela:$F=1,$T=1,$A=1" > "$OUT/ab.log" 2>&1
cat "$OUT/lu-ab.md" 2>/dev/null || tail -5 "$OUT/ab.log"
echo "== done after $SECONDS s"
exit $rc
