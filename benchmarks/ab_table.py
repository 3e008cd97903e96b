"""The Markdown rows shared by the routing A/B scripts (small_n_ab.py, mid_ab.py): one row per
point and variant, ours against torch.linalg, CuPy and JAX. No GPU imports."""

from __future__ import annotations

PEERS = ("torch", "cupy", "jax")


def ms(r: dict) -> str:
    """Best (median) ms of a timing record, or why there is none."""
    if "best_ms" in r:
        return f"{r['best_ms']:.3f} ({r['median_ms']:.3f})"
    return r.get("error") or r.get("skipped") or "-"


def variant_rows(points) -> list[str]:
    """| op | shape | batch | variant | backend | ours | torch | cupy | jax | best peer | speedup |"""
    lines = []
    for row in points:
        peers = {k: r["best_ms"] for k, r in row["peers"].items() if "best_ms" in r}
        best = min(peers.items(), key=lambda kv: kv[1]) if peers else None
        for v, r in row["ours"].items():
            sp = f"{best[1] / r['best_ms']:.2f}x" if best and "best_ms" in r else "-"
            lines.append(
                f"| {row['op']} | {row['m']}x{row['n']} | {row['batch']} | {v} | "
                f"`{r['backend']}` | {ms(r)} | "
                + " | ".join(ms(row["peers"].get(k, {})) for k in PEERS)
                + f" | {best[0] if best else '-'} | {sp} |"
            )
    return lines
