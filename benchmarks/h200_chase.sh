#!/usr/bin/env bash
# One GPU-machine call for the two-stage chase (core/kernels/sb2st.h): the torch package
# prebuilt with the CUDA backend for sm_90 in .site (as benchmarks/h200_large.sh says) and the
# scipy_openblas32 wheel in WHL; then the CUDA eigvalsh tests by two stages from n = 200,
# eigvalsh one stage vs two stages (bands 8, 16, 32) vs torch.linalg (twostage_h200.py), and
# profiles of the two-stage calls (the chase's own time: sb_sweeps). Logs and results to $OUT.
#   WHL=.whl OUT=out bash benchmarks/h200_chase.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
exec > >(tee -a "$OUT/log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  "${WHL:-.whl}"/scipy_openblas32-*.whl || exit 1
rm -rf /tmp/site/metal_linalg_torch && cp -r .site/metal_linalg_torch /tmp/site/
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
rc=0
METAL_LINALG_EIGH_TWO_STAGE_MIN_N=200 timeout "${TESTS_S:-70}" python3 -m pytest \
  tests/python/cuda/test_cuda_blocked.py -q -k "eigvalsh and not 2049" -p no:cacheprovider \
  --maxfail=10 -o addopts="" 2>&1 | tail -6
rc=$(( rc | PIPESTATUS[0] ))
echo "== tests done after ${SECONDS} s (rc $rc)"
for band in ${PROFILE_BANDS:-16 8}; do
  METAL_LINALG_EIGH_TWO_STAGE_MIN_N=1 METAL_LINALG_EIGH_BAND=$band timeout 40 \
    python3 benchmarks/profile_steps.py eigvalsh:4096x4096x1 eigvalsh:1024x1024x1 2>&1 \
    | sed "s/^==/== band $band/" | grep -E "^==|sb_|wall" | head -12
done
echo "== profiles done after ${SECONDS} s"
left=$(( ${TOTAL_S:-225} - SECONDS ))
timeout "$left" python3 benchmarks/twostage_h200.py --out "$OUT" --budget-s "$(( left - 5 ))" \
  --points "${POINTS:-1024x1,2048x1,4096x1,1024x8,512x64}" \
  --configs "${CONFIGS:-b16,b8,torch,one-stage,b32}" | tail -14
echo "== done after ${SECONDS} s (rc $rc)"
exit "$rc"
