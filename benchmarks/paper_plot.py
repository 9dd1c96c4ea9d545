"""The paper table as a figure: held-out EM per method, mean over seeds with its 95% bootstrap
interval, and each seed's own score as a dot (the same numbers as paper_table.md's Tables 3 and 4).

    python -m benchmarks.paper_table --results-dir benchmarks/results/paper_table_np12k --render-only
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt

from agent_r1.evaluation.stats import mean_ci
from benchmarks.paper_render import ABLATIONS, per_seed_em, rows_of


def plot_paper_table(res: dict[str, Any], path: Path) -> Path | None:
    """Horizontal bars on the in-domain set, Table 3 rows then the ablations; rows run for fewer
    seeds than the table's are left out (their interval would not be comparable). None if no row
    has every seed."""
    ds = next(iter(res["datasets"]))
    ablations = {x for x, _ in ABLATIONS}
    rows = []
    for kind, name, label in rows_of(res):
        scores = per_seed_em(res, kind, name, ds)
        if scores and len(scores) == len(res["seeds"]):
            rows.append((label, name in ablations, mean_ci(scores), [statistics.fmean(s) for s in scores]))
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.6))
    for y, (label, ablation, ci, seeds) in enumerate(reversed(rows)):
        ax.barh(y, ci.mean, color="#c9a66b" if ablation else "#4c78a8", alpha=0.85)
        ax.errorbar(ci.mean, y, xerr=[[ci.mean - ci.low], [ci.high - ci.mean]], color="black", capsize=3, lw=1)
        ax.scatter(seeds, [y] * len(seeds), color="black", s=12, zorder=3)
        ax.text(101, y, f"{ci.mean:.1f} [{ci.low:.1f}, {ci.high:.1f}]", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)], fontsize=8)
    ax.set_xlim(0, 125)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel(f"held-out greedy EM (%), {ds}: mean of {len(res['seeds'])} seeds, 95% bootstrap interval, "
                  "dots = seeds", fontsize=8)
    b = res["budget"]
    ax.set_title(f"Paper table at CPU scale: Table 3 (blue), Table 4 ablations (tan)\n{b['iterations']} RL "
                 f"iterations x {b['prompts_per_iter']} prompts x {b['n_samples']} samples per method and seed",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
