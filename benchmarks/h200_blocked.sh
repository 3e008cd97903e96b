#!/usr/bin/env bash
# One GPU-machine call over the blocked (large-matrix) paths (device tool, carry [".site", ".whl"]:
# the torch package prebuilt for sm_90 into .site as benchmarks/h200_large.sh says, and the
# scipy_openblas32 wheel): the blocked CUDA tests and the large hard-family accuracy tests, then
#   - QR: the fused panels (as built) against the unfused ones (baseline) and torch.linalg.qr
#     (benchmarks/qr_panels.py); when the baseline is faster in geometric mean at batch 1 the grid
#     below runs with METAL_LINALG_BLOCKED_QR_PANEL_FUSED=0 / _ROW_LARFT=0 (written to qr_choice.txt);
#   - eigvalsh's chase variants (benchmarks/chase_block_bench.py): the grid below runs with the
#     chase in one block where that beat the chase over the device at every point measured, and
#     eigvalsh by two stages from the smallest n from which that beat the default routing
#     (written to chase_choice.sh);
#   - eigh by one and two stages against torch.linalg.eigh (benchmarks/eigh2_h200.py, with the split
#     of the two-stage time), under that chase;
#   - the large-matrix grid with peers (run_gpu.py --large) in what is left of TOTAL_S seconds.
# Everything it prints goes to $OUT/log; every result file, in one archive, to $OUT/results.tgz
# (written on exit, also when a timeout ends the call).
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL=${OUT:-bench-out}
OUT=$(mktemp -d)
mkdir -p "$FINAL" "$OUT/grid"
trap 'cp "$OUT/log" "$FINAL/log"; tar czf "$FINAL/results.tgz" -C "$OUT" .' EXIT
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
exec > >(tee -a "$OUT/log") 2>&1
# shellcheck disable=SC1091
. benchmarks/h200_site.sh
rc=0
timeout "${TESTS_S:-130}" python3 -m pytest tests/python/cuda/test_cuda_blocked.py \
  tests/python/cuda/test_cuda_large_accuracy.py -q -p no:cacheprovider --maxfail=20 -o addopts="" \
  2>&1 | tail -12
rc=$(( rc | PIPESTATUS[0] ))
echo "== tests done after ${SECONDS} s"
timeout "${QR_S:-70}" python3 benchmarks/qr_panels.py --out "$OUT" --slug qr-fused \
  --only fused,baseline,torch \
  --points 1024x1024x1,2048x2048x1,4096x4096x1,4096x1024x1,3000x500x1,512x1024x1,1024x1024x8,512x512x64 \
  | tail -14
python3 - "$OUT/qr-fused.json" > "$OUT/qr_choice.txt" <<'PY'
import json, math, sys
rows = json.load(open(sys.argv[1]))
by = {(r["m"], r["n"], r["batch"], r["variant"]): r["best_ms"] for r in rows if r["op"] == "qr"}
logs = [math.log(by[(m, n, b, "baseline")] / by[(m, n, b, "fused")])
        for (m, n, b, v) in by if v == "fused" and b == 1 and (m, n, b, "baseline") in by]
g = math.exp(sum(logs) / len(logs)) if logs else 0.0
print("fused" if g >= 1.0 else "baseline", f"{g:.3f}", len(logs))
PY
echo "== QR choice: $(cat "$OUT/qr_choice.txt") (baseline / fused, geometric mean at batch 1, points)"
if [ "$(cut -d' ' -f1 "$OUT/qr_choice.txt")" = baseline ]; then
  export METAL_LINALG_BLOCKED_QR_PANEL_FUSED=0 METAL_LINALG_BLOCKED_QR_ROW_LARFT=0
fi
timeout "${CHASE_S:-100}" python3 benchmarks/chase_block_bench.py --out "$OUT" --budget-s 90 | tail -14
# The chase for the grid: the fastest one-block configuration where it beats sb_sweeps (band 8, the
# default) at every measured point; the two-stage window for every batch from the smallest n from
# which two stages with it beat the default routing at every measured point of that n and above.
python3 - "$OUT/chase_block.json" > "$OUT/chase_choice.sh" <<'PY'
import json, math, sys
try:
    recs = json.load(open(sys.argv[1]))["records"]
except Exception:  # no results: keep the defaults
    recs = []
t = {(r["config"], r["n"], r["batch"]): r["best_ms"] for r in recs if "best_ms" in r}
pts = sorted({(n, b) for (_, n, b) in t})
def gm(c):
    v = [math.log(t[(c, n, b)]) for n, b in pts if (c, n, b) in t]
    return math.exp(sum(v) / len(v)) if len(v) == len(pts) and v else math.inf
blocks = [c for c in {c for c, _, _ in t} if c.startswith("block")]
best = min(blocks, key=gm, default=None)
if best and gm(best) < math.inf and all(t[(best, n, b)] < t.get(("sweeps-b8", n, b), math.inf)
                                        for n, b in pts):
    lanes, band = best[5:].split("-b")
    print(f"export METAL_LINALG_EIGH_CHASE_BLOCK={lanes} METAL_LINALG_EIGH_BAND={band}")
    ns = sorted({n for n, _ in pts})
    wins = [n for n in ns if all(t.get((best, m, b), math.inf) < t.get(("default", m, b), 0)
                                 for m, b in pts if m >= n)]
    if wins:
        print(f"export METAL_LINALG_EIGH_TWO_STAGE_MIN_N={min(wins)}")
PY
echo "== chase choice: $(tr '\n' ';' < "$OUT/chase_choice.sh")"
# shellcheck disable=SC1091
. "$OUT/chase_choice.sh"
timeout "${EIGH2_S:-60}" python3 benchmarks/eigh2_h200.py --out "$OUT" --points 1024x1,2048x1,1024x8 \
  --configs one,two,torch | tail -8
timeout 30 python3 benchmarks/eigh2_h200.py --out "$OUT" --split 2048x1 | tail -6
echo "== variants done after ${SECONDS} s"
# shellcheck disable=SC2086
large_grid "$OUT/grid" "${TOTAL_S:-560}" 40 30 100 ${GRID_ARGS:-}
rc=$(( rc | $? ))
echo "== done after ${SECONDS} s (rc $rc)"
exit "$rc"
