#!/usr/bin/env bash
# One call on the GPU machine (device tool, carry [".whl"] holding the scipy_openblas32 wheel):
# build metal-linalg-torch there with the CUDA backend (sm_90) into /tmp/site (skipped when a
# build from this tree is already there), then run what the argument names. Results go to $OUT.
#   bash benchmarks/h200_kernels.sh ab       # CUDA tests, then ours with the new kernels (the
#                                            # simdgroup lines, the bisection lines in place of
#                                            # the QL/QR ones) and without (gpu_simd_max_n 0,
#                                            # table order) on n <= 128
#   bash benchmarks/h200_kernels.sh prof     # global launches vs the host route at n >= 256,
#                                            # Nsight Compute on a few kernels
#   bash benchmarks/h200_kernels.sh policy   # CUDA tests, then the routing policy measurement
#                                            # (tune_policy_gpu.py); its table is kept in
#                                            # /tmp/policy for a grid run in the same lease
#   bash benchmarks/h200_kernels.sh grid     # the whole grid plus the off-grid shapes, with peers,
#                                            # under /tmp/policy's table when one was measured
#   bash benchmarks/h200_kernels.sh tests    # CUDA tests only
#   bash benchmarks/h200_kernels.sh large    # the blocked algorithms' CUDA tests, then the
#                                            # large-matrix grid (run_gpu.py --large) with peers
# A prebuilt package in .site (git-ignored: `pip install --target .site ./python-torch` with the
# CUDA backend for sm_90 on the build machine, carried along) is used instead of building when
# it loads; otherwise the build runs here.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
export PYTHONPATH=/tmp/site
mode=${1:-ab}
OPS_UP=(QR EIGH EIGVALSH SVD SVDVALS)
EXTRA="17x17 24x24 37x37 100x100 127x127 100x40"

stamp=$(git rev-parse HEAD 2>/dev/null; git diff HEAD 2>/dev/null | md5sum)
if [ -d .site/metal_linalg_torch ] && [ "$(cat /tmp/site/.ml_stamp 2>/dev/null)" != "$stamp" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
    .whl/scipy_openblas32-*.whl
  rm -rf /tmp/site/metal_linalg_torch && cp -r .site/metal_linalg_torch /tmp/site/
  if python3 -c 'import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)'; then
    echo "$stamp" > /tmp/site/.ml_stamp
    echo "== prebuilt package from .site"
  else
    echo "== the prebuilt package does not load here: building"
  fi
fi
if [ "$(cat /tmp/site/.ml_stamp 2>/dev/null)" != "$stamp" ]; then
  echo "== building metal-linalg-torch (CUDA, sm_90)"
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
    .whl/scipy_openblas32-*.whl || exit 1
  rm -rf /tmp/site/metal_linalg_torch
  python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/site ./python-torch \
    -C build-dir=/tmp/build-torch -C cmake.define.ML_BUILD_CUDA=ON \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real 2>&1 | tail -20
  python3 -c 'import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)' \
    || { echo "no usable CUDA backend"; exit 1; }
  echo "$stamp" > /tmp/site/.ml_stamp
  echo "== built in $SECONDS s"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader

rc=0
tests() {
  timeout "${1:-200}" python3 -m pytest tests/python/cuda tests/python/torch/test_torch_hardening_cuda.py \
    -q -p no:cacheprovider --maxfail=40 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -25
  rc=$(( rc | PIPESTATUS[0] ))
}

if [ "$mode" = large ]; then
  timeout "${TESTS_S:-200}" python3 -m pytest tests/python/cuda/test_cuda_blocked.py \
    tests/python/cuda/test_cuda_global.py -q -p no:cacheprovider --maxfail=40 -o addopts="" 2>&1 \
    | tee "$OUT/pytest.log" | tail -25
  rc=$(( rc | PIPESTATUS[0] ))
  left=$(( ${LARGE_S:-570} - SECONDS ))
  timeout "$left" python3 benchmarks/run_gpu.py --out "$OUT" --large ${LARGE_ARGS:-} \
    --point-ms 300 --reps 5 --budget-s "$(( left - 90 ))" --ours-extra-s 60 2>&1 \
    | tee "$OUT/bench.log" | tail -70
  rc=$(( rc | PIPESTATUS[0] ))
fi
if [ "$mode" = tests ] || [ "$mode" = ab ]; then
  tests 240
fi
if [ "$mode" = ab ]; then
  SH="9x9 12x12 16x16 17x17 24x24 32x32 37x37 48x48 64x64 64x32 100x100 127x127 128x128 100x40"
  for r in ${AB_ROUNDS:-1}; do
    METAL_LINALG_CUDA_SKIP_KERNELS=${NEW_SKIP:-eigh_tridiag_ql,eigvalsh_tridiag_ql,svdvals_bidiag_qr} \
    timeout 100 python3 benchmarks/run_gpu.py --out "$OUT/simd$r" --impls ours --shapes $SH \
      --extra-shapes $EXTRA 9x9 12x12 48x48 --point-ms 150 --reps 8 --budget-s 80 \
      --ours-extra-s 10 > "$OUT/simd$r.log" 2>&1
    echo "simd$r rc=$? at $SECONDS s"
    off=()
    for o in "${OPS_UP[@]}"; do off+=("METAL_LINALG_${o}_GPU_SIMD_MAX_N=0"); done
    env "${off[@]}" timeout 100 python3 benchmarks/run_gpu.py --out "$OUT/base$r" --impls ours \
      --shapes $SH --extra-shapes $EXTRA 9x9 12x12 48x48 --point-ms 150 --reps 8 --budget-s 80 \
      --ours-extra-s 10 \
      > "$OUT/base$r.log" 2>&1
    echo "base$r rc=$? at $SECONDS s"
  done
  old=$(ls "$OUT"/base*/*.json | paste -sd,); new=$(ls "$OUT"/simd*/*.json | paste -sd,)
  python3 benchmarks/compare_results.py "$old" "$new" --max-n 128 --md "$OUT/ab.md" \
    --png "$OUT/ab.png" | tail -90
  cp "$OUT"/simd1/*.json "$OUT/simd1.json"; cp "$OUT"/base1/*.json "$OUT/base1.json"
fi
if [ "$mode" = prof ]; then
  GSH=${GSH:-"256x256 512x512 1024x512"}
  on=()
  for o in "${OPS_UP[@]}"; do on+=("METAL_LINALG_${o}_GPU_GLOBAL_MAX_N=4096" "METAL_LINALG_${o}_GPU_GLOBAL_MIN_BATCH=1"); done
  env "${on[@]}" timeout 200 python3 benchmarks/run_gpu.py --out "$OUT/global" --impls ours \
    --shapes $GSH --point-ms 150 --reps 5 --budget-s 150 --ours-extra-s 30 > "$OUT/global.log" 2>&1
  echo "global rc=$? at $SECONDS s"
  timeout 150 python3 benchmarks/run_gpu.py --out "$OUT/host" --impls ours --shapes $GSH \
    --point-ms 150 --reps 5 --budget-s 100 --ours-extra-s 30 > "$OUT/host.log" 2>&1
  echo "host rc=$? at $SECONDS s"
  python3 benchmarks/compare_results.py "$OUT"/host/*.json "$OUT"/global/*.json --max-n 4096 \
    --md "$OUT/global.md" | tail -40
  cp "$OUT"/global/*.json "$OUT/global.json"
  if command -v ncu >/dev/null && [ "$SECONDS" -lt 470 ]; then
    specs=("eigh 32 32 16384" "svd 32 32 16384" "qr 64 64 16384" "qr 32 32 16384")
    for spec in "${specs[@]}"; do
      timeout 40 ncu --clock-control none --profile-from-start off \
        --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        python3 benchmarks/profile_call.py $spec > "$OUT/ncu_${spec// /_}.txt" 2>&1
      echo "ncu $spec rc=$?"
    done
    cat "$OUT"/ncu_*.txt > "$OUT/ncu.txt"
  fi
fi
if [ "$mode" = policy ]; then
  tests 150
  left=$(( 560 - SECONDS ))
  timeout "$left" python3 benchmarks/tune_policy_gpu.py --out "$OUT" \
    --budget-s "$(( left - 60 ))" 2>&1 | tee "$OUT/policy-gpu.log" | tail -80
  rc=$(( rc | PIPESTATUS[0] ))
  mkdir -p /tmp/policy && cp "$OUT"/*.policy /tmp/policy/ 2>/dev/null
fi
if [ "$mode" = grid ]; then
  for f in /tmp/policy/*.policy; do
    [ -e "$f" ] && export METAL_LINALG_POLICY_FILE=$f && echo "== policy file $f"
  done
  timeout 560 python3 benchmarks/run_gpu.py --out "$OUT" --extra-shapes $EXTRA \
    --budget-s "${GRID_BUDGET_S:-400}" --ours-extra-s 60 2>&1 | tee "$OUT/bench.log" | tail -60
  rc=$(( rc | PIPESTATUS[0] ))
fi
echo "== total $SECONDS s"
exit "$rc"
