# Sourced first by GPU-machine scripts (benchmarks/h200_*.sh), from the repository root: OUT
# (default bench-out) made, Python unbuffered and without bytecode files, no calibration notice;
# then the helpers below.
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1

cuda_usable() {
  python3 -c 'import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)'
}

# install_or_build WHEEL_DIR ARCHS: the torch package into /tmp/site (PYTHONPATH) from the wheel
# carried in WHEEL_DIR (built on the build machine with the CUDA backend), or, where there is none
# or its CUDA backend is unusable here, built here for CMAKE_CUDA_ARCHITECTURES=ARCHS; exits
# when the CUDA backend is still unusable.
install_or_build() {
  export PYTHONPATH=/tmp/site
  if ls "$1"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$1"/*.whl
  fi
  if ! cuda_usable 2>/dev/null; then
    echo "== building the CUDA backend here"
    rm -rf /tmp/site/metal_linalg_torch
    CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=$2" CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip \
      install -q --no-build-isolation --no-deps --target /tmp/site ./python-torch 2>&1 | tail -20
    cuda_usable || { echo "CUDA backend unusable"; exit 1; }
  fi
}

# large_grid DIR TOTAL MARGIN EXTRA_S LINES [ARGS...]: the large-matrix grid with the peers
# (run_gpu.py --large, results in DIR) in what is left of TOTAL seconds of the call (its budget
# MARGIN seconds less, the package's own extra time EXTRA_S), the last LINES lines of its output;
# returns the grid's status.
large_grid() {
  local dir=$1 total=$2 margin=$3 extra=$4 lines=$5 left status
  shift 5
  left=$(( total - SECONDS ))
  timeout "$left" python3 benchmarks/run_gpu.py --out "$dir" --large --point-ms 200 --reps 5 \
    --cap-ms 300 --budget-s "$(( left - margin ))" --ours-extra-s "$extra" "$@" | tail -"$lines"
  status=${PIPESTATUS[0]}
  rm -f "$dir/inflight.json"
  return "$status"
}
