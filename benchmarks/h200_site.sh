# Sourced by the GPU-machine scripts that take the torch package prebuilt with the CUDA backend for
# sm_90 into .site (benchmarks/h200_large.sh says how) and the scipy_openblas32 wheel in .whl:
# installs both into /tmp/site, checks that the CUDA backend is usable and prints the GPU's clocks.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .whl/scipy_openblas32-*.whl || exit 1
rm -rf /tmp/site/metal_linalg_torch && cp -r .site/metal_linalg_torch /tmp/site/
export PYTHONPATH=/tmp/site
python3 -c 'import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)' \
  || { echo "the prebuilt package has no usable CUDA backend here"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
