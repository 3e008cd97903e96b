#!/usr/bin/env bash
# One call on the GPU machine (device tool, carry [".whl"]): install the carried wheels (the
# metal-linalg-torch wheel built here with the CUDA backend, scipy-openblas32), build there only
# if that wheel cannot be used, then run what the argument names. Logs and results go to $OUT.
#   bash benchmarks/h200_session.sh tests        # CUDA pytest only
#   bash benchmarks/h200_session.sh quick        # tests + a few benchmark points + group-size scan
#   bash benchmarks/h200_session.sh full         # CUDA pytest + the whole benchmark grid (< 560 s)
#   bash benchmarks/h200_session.sh lane         # CUDA pytest + block vs lane-per-matrix sweep
#   bash benchmarks/h200_session.sh policy       # CUDA pytest (also 16-lane groups) + routing policy
#                                                # measurement (tune_policy_gpu.py)
#   bash benchmarks/h200_session.sh final        # the whole grid (< 470 s), then CUDA pytest
#   bash benchmarks/h200_session.sh check        # CUDA pytest + the grid's points of n <= 32
# Build the wheel here first:
#   python3 -m pip wheel --no-build-isolation --no-deps ./python-torch -w .whl
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
mode=${1:-quick}

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
usable='import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)'
if ! python3 -c "$usable"; then
  echo "== the carried wheel has no usable CUDA backend here: building on this machine"
  rm -rf /tmp/site/metal_linalg_torch
  CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90" python3 -m pip install -q --no-build-isolation \
    --no-deps --target /tmp/site ./python-torch 2>&1 | tail -20
  python3 -c "$usable" || { echo "CUDA backend still unusable"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 -c 'import metal_linalg_torch as m, torch; print(m.device_name(), torch.__version__)'

rc=0
if [ "$mode" = tests ] || [ "$mode" = quick ]; then
  timeout 200 python3 -m pytest tests/python/cuda -q -p no:cacheprovider --maxfail=40 \
    -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -60
  rc=${PIPESTATUS[0]}
  # The same suite with several one-warp groups per block (the launch geometry for small n).
  METAL_LINALG_CUDA_GROUPS_PER_BLOCK=4 timeout 200 python3 -m pytest tests/python/cuda -q \
    -p no:cacheprovider --maxfail=40 -o addopts="" 2>&1 | tee "$OUT/pytest_g4.log" | tail -30
  rc=$(( rc | PIPESTATUS[0] ))
fi
if [ "$mode" = lane ]; then
  timeout 300 python3 -m pytest tests/python/cuda -q -p no:cacheprovider --maxfail=40 \
    -o addopts="" --durations=5 2>&1 | tee "$OUT/pytest.log" | tail -40
  rc=${PIPESTATUS[0]}
  timeout 200 python3 benchmarks/lane_sweep.py --out "$OUT" --budget-s 170 2>&1 | tee "$OUT/lane.log"
fi
if [ "$mode" = policy ]; then
  timeout 240 python3 -m pytest tests/python/cuda -q -p no:cacheprovider --maxfail=40 \
    -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -15
  rc=${PIPESTATUS[0]}
  # Sub-warp groups (16 lanes, two matrices per warp) for every launch: correctness of each kernel.
  METAL_LINALG_CUDA_GROUP_SIZE=16 timeout 120 python3 -m pytest tests/python/cuda -q \
    -p no:cacheprovider --maxfail=40 -o addopts="" -k "block" 2>&1 | tee "$OUT/pytest_g16.log" | tail -8
  rc=$(( rc | PIPESTATUS[0] ))
  if [ -n "${SWEEP_G16:-}" ]; then  # their speed against 32-lane groups (block variant)
    for gs in 16 32; do
      METAL_LINALG_CUDA_GROUP_SIZE=$gs timeout 60 python3 benchmarks/lane_sweep.py --out "$OUT" \
        --block-only --sizes 9 12 16 --batches 1024 16384 --tag _g$gs --budget-s 45 2>&1 | tail -16
    done
  fi
  timeout 330 python3 benchmarks/tune_policy_gpu.py --out "$OUT" --budget-s ${POLICY_BUDGET_S:-210} \
    2>&1 | tee "$OUT/policy-gpu.log" | tail -60
fi
if [ "$mode" = final ]; then  # the grid with the committed tuned table, then the CUDA tests
  timeout 470 python3 benchmarks/run_gpu.py --out "$OUT" --budget-s 360 --ours-extra-s 70 \
    2>&1 | tee -a "$OUT/bench.log" | tail -170
  for j in "$OUT"/*.json; do
    case "$(basename "$j")" in inflight.json | tune_groups.json | policy-gpu.json) continue ;; esac
    [ -e "${j%.json}.md" ] || python3 benchmarks/run_gpu.py --report "$j"
  done
  left=$(( 575 - SECONDS ))
  [ "$left" -gt 20 ] && timeout "$left" python3 -m pytest tests/python/cuda -q -p no:cacheprovider \
    --maxfail=40 -o addopts="" -k "block" 2>&1 | tee "$OUT/pytest.log" | tail -8
fi
if [ "$mode" = check ]; then
  timeout 200 python3 -m pytest tests/python/cuda -q -p no:cacheprovider --maxfail=40 \
    -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -8
  rc=${PIPESTATUS[0]}
  timeout 240 python3 benchmarks/run_gpu.py --out "$OUT" --shapes 8x8 16x16 32x32 --budget-s 150 \
    --ours-extra-s 40 2>&1 | tee -a "$OUT/bench.log" | tail -70
fi
if [ "$mode" = quick ]; then
  timeout 130 python3 benchmarks/run_gpu.py --quick --budget-s 80 --out "$OUT" 2>&1 \
    | tee "$OUT/bench.log" | tail -40
  timeout 170 python3 benchmarks/tune_cuda_groups.py --out "$OUT" 2>&1
fi
if [ "$mode" = full ]; then
  timeout 120 python3 -m pytest tests/python/cuda -q -p no:cacheprovider --maxfail=40 \
    -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -15
  rc=${PIPESTATUS[0]}
  # The benchmark gets what is left of about 560 s: peers stop at --budget-s, ours 80 s later.
  # A call that crashes the process (seen: a segfault in the CPU path) is recorded as an error
  # and the grid resumes, at most four times.
  budget=$(( 560 - SECONDS - 130 ))
  resume=""
  for attempt in 1 2 3 4 5; do
    left=$(( 560 - SECONDS ))
    [ "$left" -lt 40 ] && break
    timeout "$left" python3 benchmarks/run_gpu.py --out "$OUT" --budget-s "$budget" \
      --ours-extra-s 80 $resume 2>&1 | tee -a "$OUT/bench.log" | tail -170
    st=${PIPESTATUS[0]}
    [ "$st" -eq 0 ] && break
    echo "== run_gpu.py exited with status $st (attempt $attempt): resuming"
    resume=--resume
  done
  for j in "$OUT"/*.json; do  # a grid cut short still gets its table and plot
    case "$(basename "$j")" in inflight.json | tune_groups.json) continue ;; esac
    [ -e "${j%.json}.md" ] || python3 benchmarks/run_gpu.py --report "$j"
  done
fi
exit "$rc"
