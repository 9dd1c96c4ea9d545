"""Markdown and a figure for benchmarks/paper_table.py: the paper's Tables 3 and 4 at CPU scale, with intervals.

Every cell is the mean EM over seeds and questions with its 95% two-level bootstrap interval
(agent_r1/evaluation/stats.py); the differences table bootstraps each comparison paired (same seeds,
same questions) and says whether its interval excludes 0. The figure (`plot_paper_table`): held-out
EM per method, the mean over seeds with its interval, and each seed's own score as a dot.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from agent_r1.evaluation.harness import format_table
from agent_r1.evaluation.stats import mean_ci, paired_difference_ci
from benchmarks.objective_rows import OBJECTIVES

ALGORITHMS = ("ppo", "grpo", "reinforce_pp", "reinforce_pp_baseline", "rloo")
# (ablation, the full method it removes something from), as in the paper's Table 4
ABLATIONS = (("ppo_adv_mask_off", "ppo"), ("ppo_masks_off", "ppo"), ("ppo_loss_mask_off", "ppo"),
             ("grpo_loss_mask_off", "grpo"), ("ppo_process_on", "ppo"), ("ppo_process_off", "ppo_process_on"))
BEYOND = tuple(OBJECTIVES)  # rows beyond the paper, each compared with GRPO (the recipe they modify)


def per_seed_em(res: dict[str, Any], kind: str, name: str, ds: str) -> list[list[float]] | None:
    """EM (0/100) per question, one row per seed that has run it (a table saved mid-run has fewer);
    None when none has."""
    rows = []
    for seed in res["seeds"]:
        row = res["per_seed"].get(str(seed), {}).get(kind, {}).get(name)
        if row is not None and ds in row.get("em_per_question", {}):
            rows.append([100.0 * x for x in row["em_per_question"][ds]])
    return rows or None


def rows_of(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(kind, name, label) for every baseline and method, in table order: the paper's order of
    algorithms and ablations, whatever order a resumed run added them to the file in."""
    first = res["per_seed"][str(res["seeds"][0])]
    order = {name: i for i, name in enumerate(ALGORITHMS + tuple(x for x, _ in ABLATIONS) + BEYOND)}
    methods = sorted(first["methods"].items(), key=lambda item: order.get(item[0], len(order)))
    return ([("baselines", n, r["label"]) for n, r in first["baselines"].items()]
            + [("methods", n, r["label"]) for n, r in methods])


def ci_cell(res: dict[str, Any], kind: str, name: str, ds: str) -> str:
    rows = per_seed_em(res, kind, name, ds)
    if not rows:
        return "-"
    partial = f" ({len(rows)} of {len(res['seeds'])} seeds)" if len(rows) < len(res["seeds"]) else ""
    return str(mean_ci(rows)) + partial


def diff_line(res: dict[str, Any], ds: str, a: tuple[str, str], b: tuple[str, str], labels: dict[str, str]) -> str | None:
    ra, rb = per_seed_em(res, *a, ds), per_seed_em(res, *b, ds)
    if ra is None or rb is None or len(ra) != len(rb):
        return None
    d = paired_difference_ci(ra, rb)
    verdict = ("yes: " + (labels[a[1]] if d.mean > 0 else labels[b[1]]) + " higher") if d.excludes_zero() else "no"
    return f"| {labels[a[1]]} - {labels[b[1]]} | {d} | {verdict} |"


def comparisons(res: dict[str, Any]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    methods = set(res["per_seed"][str(res["seeds"][0])]["methods"])
    algos = [m for m in ALGORITHMS if m in methods]
    pairs = [(("methods", m), ("baselines", "agent")) for m in algos]
    pairs += [(("methods", a), ("methods", b)) for i, a in enumerate(algos) for b in algos[i + 1:]]
    pairs += [(("methods", x), ("methods", full)) for x, full in ABLATIONS if x in methods and full in methods]
    pairs += [(("methods", x), ("methods", "grpo")) for x in BEYOND if x in methods and "grpo" in methods]
    return pairs


def header(res: dict[str, Any]) -> list[str]:
    b = res["budget"]
    ds_names = list(res["datasets"])
    threads = res["machine"].get("torch_threads", res["machine"].get("cpus"))  # "cpus" in files before issue 32
    seeds = res["seeds"]
    return [
        "# Paper table at CPU scale (synthetic multi-hop world)",
        "",
        f"Command: `{res['command']}`  ",
        (f"Config hash: `{res['config_hash']}`; total wall time {res['wall_seconds'] / 60:.1f} min on "
         f"{threads} CPU threads (load average {res.get('load', '?')}); model "
         f"{res['model_params'] / 1e6:.2f}M parameters; greedy decoding.  "),
        (f"Seeds {', '.join(map(str, seeds))}: each seed is its own world (people, names), its own SFT warm start "
         f"({b['sft_steps']} steps, guess fraction {b['guess_fraction']}) and its own RL runs. RL budget per method "
         f"and seed: {b['iterations']} iterations x {b['prompts_per_iter']} prompts x {b['n_samples']} samples.  "),
        f"Datasets: `{ds_names[0]}` = in-domain ({res['datasets'][ds_names[0]]} held-out questions per seed), "
        + ", ".join(f"`{d}` = out-of-domain ({res['datasets'][d]} per seed)" for d in ds_names[1:]) + ".",
        "",
        (f"Cells: mean EM (%) over {len(seeds)} seed(s) x questions, with the 95% interval of a bootstrap over "
         "seeds and then questions. F1 and substring EM are in the JSON, never blended."),
        "",
    ]


def em_table(res: dict[str, Any], rows: list[tuple[str, str, str]]) -> list[str]:
    """A markdown table of these (kind, name, label) rows: EM mean [95% interval] per dataset."""
    ds_names = list(res["datasets"])
    return (["| method | " + " | ".join(f"EM {d}" for d in ds_names) + " |", "|---|" + "---|" * len(ds_names)]
            + [f"| {label} | " + " | ".join(ci_cell(res, kind, name, d) for d in ds_names) + " |"
               for kind, name, label in rows])


def render_markdown(res: dict[str, Any]) -> str:
    ds_names = list(res["datasets"])
    rows = rows_of(res)
    labels = {name: label for _, name, label in rows}
    ablations = {x for x, _ in ABLATIONS}
    lines = header(res) + ["## Table 3: baselines and algorithms", ""]
    lines += em_table(res, [r for r in rows if r[1] not in ablations and r[1] not in BEYOND])
    if any(n in ablations for _, n, _ in rows):
        lines += ["", "## Table 4: ablations", ""]
        lines += em_table(res, [r for r in rows if r[1] in ablations or r[1] in ("ppo", "grpo")])
    if any(n in BEYOND for _, n, _ in rows):
        lines += ["", "## Beyond the paper: the objectives the field trains with now", "",
                  "Each over GRPO's budget with its reference's settings (benchmarks/objective_rows.py).", ""]
        lines += em_table(res, [r for r in rows if r[1] in BEYOND or r[1] == "grpo"])
    diffs = [line for a, b in comparisons(res) if (line := diff_line(res, ds_names[0], a, b, labels))]
    if diffs:
        lines += ["", f"## Which differences the intervals support ({ds_names[0]}, paired bootstrap)", "",
                  "| difference (EM points) | mean [95% interval] | interval excludes 0? |", "|---|---|---|"] + diffs
    lines += real_section(res) + ["", "## Detail per seed", ""]
    for seed in res["seeds"]:
        one = res["per_seed"].get(str(seed))
        if one is None:
            continue
        detail = {"results": {r["label"]: r["metrics"] for r in list(one["baselines"].values())
                              + list(one["methods"].values())}}
        lines += [f"### seed {seed}", "", format_table(detail).replace("| mode |", "| method |", 1), ""]
    return "\n".join(lines)


def real_section(res: dict[str, Any]) -> list[str]:
    real = res.get("real")
    if not real:
        return []
    lines = ["", "## Shared real data (seed 0's models; tiny local model, so near-zero scores are expected)", "",
             (f"Index: HotpotQA dev-distractor 400 corpus ({real['num_docs']} paragraphs, tantivy); 2Wiki, "
              f"MuSiQue and Bamboogle are searched over that same corpus (out-of-domain). First {real['n']} "
              "questions of each file."), ""]
    first = format_table(next(iter(real["reports"].values()))).splitlines()
    lines += ["| model " + first[0], "|---" + first[1]]
    for model_name, report in real["reports"].items():
        lines += [f"| {model_name} " + line for line in format_table(report).splitlines()[2:]]
    return lines


def plot_paper_table(res: dict[str, Any], path: Path) -> Path | None:
    """Horizontal bars on the in-domain set, Table 3 rows then the ablations; rows run for fewer
    seeds than the table's are left out (their interval would not be comparable). None if no row
    has every seed."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server or in CI
    import matplotlib.pyplot as plt

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
