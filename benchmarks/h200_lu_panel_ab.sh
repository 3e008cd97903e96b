#!/usr/bin/env bash
# One GPU-machine call: the LU register panels of two builds of the torch package side by side
# (each a `pip install --target` of python-torch for sm_90, packed with `tar czf X.tgz -C site .`
# and carried with the call), BASE (the former panels) and NEW (this tree's), on one machine:
#   1. NEW: tests/python/cuda/test_cuda_linsys.py,
#   2. each build: benchmarks/profile_steps.py on lu_factor 1024 / 2048 / 4096 x1 under the
#      default (launches), the fused register panels (fuse), with the triangular solves a vector
#      a lane (fuselane; BASE has neither, so there both are the default again) and the leaves,
#   3. each build: benchmarks/linsys_ab.py with torch.linalg: the default (launches), the fused
#      panels without and with lookahead (fuse, fusela), the triangular solves a vector a lane
#      (lane; with the fused panels: fuselane, fuselanela), the leaves (leaf), with lookahead
#      (leafla), and with panels of 64 / 32 columns (la64 / la32),
#   4. NEW: benchmarks/linsys_gpu.py with torch.linalg, CuPy and JAX under FINAL's variables
#      (default: none, the built-in choices).
# RUN_TESTS=0 skips 1, RUN_FINAL=0 skips 4 (the whole may not fit one call's 600 s).
#   BASE=.ab/base.tgz NEW=.ab/new.tgz OUT=out bash benchmarks/h200_lu_panel_ab.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
L=METAL_LINALG_LS_LU_LEAF A=METAL_LINALG_LS_LU_LOOKAHEAD N=METAL_LINALG_LS_LU_NB
F=METAL_LINALG_LS_LU_FUSE T=METAL_LINALG_LS_TRSM_LANE
for b in base new; do
  mkdir -p "/tmp/$b"
  src=$([ "$b" = base ] && echo "$BASE" || echo "$NEW")
  tar xzf "$src" -C "/tmp/$b" || { echo "cannot unpack $src"; exit 1; }
done
with() {  # with BUILD COMMAND...: COMMAND with BUILD's package first on PYTHONPATH
  local b=$1
  shift
  PYTHONPATH="/tmp/$b:$PWD/benchmarks" "$@"
}
if [ "${RUN_TESTS:-1}" != 0 ]; then
  with new timeout "${PYTEST_S:-150}" python3 -m pytest tests/python/cuda/test_cuda_linsys.py -q \
    -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -4
  echo "== tests done after $SECONDS s"
fi
for b in base new; do
  VARIANTS="launches:$L=0,$A=0;fuse:$F=1;fuselane:$F=1,$T=1;leaf:$L=1,$A=0" with "$b" \
    timeout "${PROFILE_S:-60}" python3 benchmarks/profile_steps.py lu_factor:1024x1024x1 \
    lu_factor:2048x2048x1 lu_factor:4096x4096x1 2>&1 | tee "$OUT/profile_steps-$b.log" | grep "=="
  with "$b" timeout "${AB_S:-120}" python3 benchmarks/linsys_ab.py --out "$OUT" --slug "lu-ab-$b" \
    --reps 5 --peers torch --points lu_factor:1024:1 lu_factor:2048:1 lu_factor:4096:1 \
    lu_factor:2048:8 solve:4096:1:1 inv:2048:1 --variant "launches:$L=0,$A=0" \
    --variant "fuse:$F=1" --variant "fusela:$F=1,$A=1" --variant "lane:$T=1" \
    --variant "fuselane:$F=1,$T=1" --variant "fuselanela:$F=1,$T=1,$A=1" \
    --variant "leaf:$L=1,$A=0" \
    --variant "leafla:$L=1,$A=1" --variant "la64:$L=1,$A=1,$N=64" \
    --variant "la32:$L=1,$A=1,$N=32" >"$OUT/ab-$b.log" 2>&1
  cat "$OUT/lu-ab-$b.md" 2>/dev/null || tail -5 "$OUT/ab-$b.log"
  echo "== $b done after $SECONDS s"
done
[ "${RUN_FINAL:-1}" = 0 ] && exit 0
# shellcheck disable=SC2086
with new env ${FINAL:-} timeout "${BENCH_S:-120}" python3 benchmarks/linsys_gpu.py --out "$OUT" \
  --slug nvidia-h200-linsys-lu-large --reps 5 --points lu_factor:1024:1 lu_factor:2048:1 \
  lu_factor:4096:1 lu_factor:2048:8 lu_factor:1024:8 solve:1024:1:1 solve:4096:1:1 \
  solve:2048:8:16 inv:1024:1 inv:2048:1 2>&1 | tail -20
echo "== all done after $SECONDS s"
