#!/usr/bin/env bash
# The main job of the README: set up .venv (tools/setup.sh), then show what this machine runs and
# benchmark a quick grid against the peers on the default device (CUDA when present, else the CPU).
# Results (JSON, Markdown, PNG) go to bench-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
python -m metal_linalg_torch info
python -m metal_linalg_torch bench --quick --out bench-out "$@"
python -m metal_linalg bench --out bench-out
