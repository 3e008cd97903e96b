#!/usr/bin/env bash
# The main job of the README: set up .venv (tools/setup.sh), then show what this machine runs and
# benchmark a quick grid against the peers with each package on its default device (the GPU when
# present, else the CPU). Both command lines take the same flags; extra arguments go to both
# benches (e.g. --ops eigh). Results (JSON, Markdown, PNG) go to bench-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
python -m metal_linalg_torch demo --out bench-out "$@"
python -m metal_linalg bench --quick --out bench-out "$@"
