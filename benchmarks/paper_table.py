"""The Agent-R1 paper's comparison tables at CPU scale (a LONG benchmark; `--micro` is the CI smoke).

Per seed (each its own world, warm start and RL runs; `--seeds 0,1,2` for intervals), from one SFT
warm start on the synthetic multi-hop world (tantivy search, a small Llama built here):
1. Baselines from that warm start: `direct` (no retrieval), `rag` (naive RAG: top-k docs with the
   question, one turn) and `agent` (multi-turn tool use, no RL).
2. RL from the warm start with PPO (gae + critic), GRPO, REINFORCE++, REINFORCE++-baseline and RLOO,
   all with the same budget (iterations x prompts x samples); then the paper's ablations (PPO with
   the advantage mask off, then both masks off; GRPO with the loss mask off) and ours (PPO loss mask
   off, process reward on (retrieval hit 0.2) vs off); beyond the paper, the objectives the field
   trains with now (GSPO, CISPO, Dr. GRPO, DAPO, GiGPO: benchmarks/objective_rows.py).
3. Greedy evaluation of every model, agent mode, in-domain (synthetic test split: one-hop and bridge
   questions about people never seen in training) and out-of-domain (comparison questions, a type
   never trained on, over the same unseen people; same corpus and index).
4. The same harness on the real data samples (samples/, tracked in the repo): HotpotQA dev (its own
   3,952-paragraph corpus, tantivy) and 2Wiki / MuSiQue / Bamboogle questions over that corpus
   (out-of-domain), for the first seed's warm start in the three modes and its best RL model in agent
   mode. With ~1M-parameter local models trained only on the synthetic world these scores are near
   zero: they check the harness, not the method.

Writes paper_table.md and .json into `--results-dir` (EM per method and dataset with bootstrap
intervals, paired differences, F1 / substring EM beside it, every question's score, wall time,
config hash); `--render-only` rewrites the markdown from the JSON.

    python -m benchmarks.paper_table --seeds 0,1,2 --iterations 40 --eval-n 100 --real-n 50 \
        --warm-start 'benchmarks/.work/learn_np12k/seed{seed}/sft/model' \
        --methods ppo,grpo,reinforce_pp,reinforce_pp_baseline,rloo,ppo_adv_mask_off,ppo_masks_off,grpo_loss_mask_off \
        --results-dir benchmarks/results/paper_table_np12k   # the README's table: 62 min on 2 idle cores;
        # call it again after an interruption (what is in the results file for the same setup is kept);
        # the rows beyond the paper, beside a GRPO run by the same code: --seeds 0,1,2,3,4 --real-n 0
        # --methods grpo,gspo,cispo,dr_grpo,dapo,gigpo --results-dir benchmarks/results/paper_table_objectives
    python -m benchmarks.paper_table                      # full (hours on 2 CPU cores)
    python -m benchmarks.paper_table --iterations 12 --eval-n 100 --real-n 100   # reduced
    python -m benchmarks.paper_table --micro --work /tmp/pt   # CI smoke: tiny model, 2 RL methods
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_r1.config import load_config
from agent_r1.evaluation.harness import em_per_question, evaluate_model, format_table, load_question_set
from agent_r1.evaluation.stats import mean_ci, paired_difference_ci
from agent_r1.retrieval.base import build_index
from agent_r1.runs.assembly import set_threads
from agent_r1.runs.run import Run, run_train
from agent_r1.runs.warm_start import run_sft
from benchmarks import objective_rows
from benchmarks.common import ROOT, machine, micro_overrides, results_dir, shown, work_dir, write_json

SAMPLES = ROOT / "samples"  # public dataset samples, tracked in the repo (samples/README.md: sources, licences)
REAL_SETS = {  # name -> path under samples/; all searched over the HotpotQA corpus
    "hotpotqa": "hotpotqa/hotpotqa_dev_distractor_400.jsonl",
    "2wiki": "2wiki.questions.jsonl",
    "musique": "musique.questions.jsonl",
    "bamboogle": "bamboogle.questions.jsonl",
}

# name -> (label, overrides on top of the base config); every run starts from the same warm start
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "ppo": ("PPO (GAE + critic)", {"algo.adv_estimator": "gae", "algo.lam": 0.95}),
    "grpo": ("GRPO", {"algo.adv_estimator": "grpo"}),
    "reinforce_pp": ("REINFORCE++", {"algo.adv_estimator": "reinforce_pp"}),
    "reinforce_pp_baseline": ("REINFORCE++-baseline", {"algo.adv_estimator": "reinforce_pp_baseline"}),
    "rloo": ("RLOO", {"algo.adv_estimator": "rloo"}),
    "ppo_loss_mask_off": ("PPO, loss mask off", {"algo.adv_estimator": "gae", "algo.lam": 0.95,
                                                 "algo.loss_mask": False}),
    "ppo_adv_mask_off": ("PPO, advantage mask off", {"algo.adv_estimator": "gae", "algo.lam": 0.95,
                                                     "algo.advantage_mask": False}),
    "ppo_masks_off": ("PPO, advantage and loss masks off", {"algo.adv_estimator": "gae", "algo.lam": 0.95,
                                                            "algo.advantage_mask": False, "algo.loss_mask": False}),
    "grpo_loss_mask_off": ("GRPO, loss mask off", {"algo.adv_estimator": "grpo", "algo.loss_mask": False}),
    "ppo_process_on": ("PPO + process reward (retrieval hit 0.2)",
                       {"algo.adv_estimator": "gae", "algo.lam": 0.95, "reward.retrieval_hit_reward": 0.2}),
    "ppo_process_off": ("PPO, process reward off (switch)",
                        {"algo.adv_estimator": "gae", "algo.lam": 0.95, "reward.retrieval_hit_reward": 0.2,
                         "reward.process_reward": False}),
    # beyond the paper: the objectives the field trains with now, over GRPO's budget
    **objective_rows.OBJECTIVES,
}
BASELINES = {"direct": "Direct answer (no retrieval)", "rag": "Naive RAG (top-k in prompt, one turn)",
             "agent": "Agent, SFT warm start (no RL)"}
MICRO_METHODS = ("ppo", "grpo")


rel = shown  # a path relative to the repo root when it lies inside it (portable reports)


def config_hash(obj: Any) -> str:
    """Short SHA-1 of a config; paths inside the repo count relative to it, so the hash does not
    depend on where the repo is cloned."""
    text = json.dumps(obj, sort_keys=True, default=str).replace(str(ROOT) + "/", "")
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def base_overrides(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The learning benchmark's setup (same world, model size, SFT recipe), in our own work dir."""
    base = {
        "data.dir": str(work / "data"), "search.index_dir": str(work / "index"), "model.tokenizer": "syllable",
        "data.question_types": ["one_hop", "bridge"], "data.n_people": 12000, "sft.out_dir": str(work / "sft"),
        "sft.steps": args.sft_steps, "sft.guess_fraction": args.guess_fraction, "train.threads": args.threads,
        "train.iterations": args.iterations, "train.prompts_per_iter": args.prompts_per_iter,
        "rollout.n_samples": args.n_samples, "train.lr_schedule": args.lr_schedule,
        # the recorded results' update: params.yaml's make-run recipe since moved to mini-batches of 128
        # and skip_zero_advantage, which would change these runs at float level (and refuse a KL term)
        "train.minibatch_size": 64, "algo.skip_zero_advantage": False,
        "env.format_instructions": False, "train.eval_every": 0,
        "train.eval_size": args.eval_n, "train.checkpoint_every": 1000, "train.log_trajectories_every": 0,
        "train.runs_dir": str(work / "runs"),  # its digest cache too: never the repository's runs/
    }
    if args.micro:  # the micro model and world (common.micro_overrides), turns long enough to answer
        base.update({k: v for k, v in micro_overrides(work).items() if k.startswith(("model.", "data.n_"))})
        base.update({"sft.batch_size": 8, "train.minibatch_size": 8, "train.ppo_epochs": 1,
                     "rollout.max_turns": 3, "rollout.max_tokens_per_turn": 24})
    return base


def ood_questions(cfg, work: Path, n: int) -> list[dict[str, Any]]:
    """Comparison questions over the test people: a question type never trained on. The world is
    generated (the data of a Run of its own, under work/ood_world) with all types from the same seed;
    the corpus must equal the training world's. The set is kept in work/ood/comparison_test.jsonl."""
    tree = cfg.to_dict()
    tree["data"].update(dir=str(work / "ood_world"), question_types=["one_hop", "bridge", "comparison"])
    ood = Run(load_config(tree=tree))
    if (ood.data_dir / "corpus.jsonl").read_bytes() != (Path(cfg.data.dir) / "corpus.jsonl").read_bytes():
        raise RuntimeError("the out-of-domain world's corpus differs from the training world's")
    rows = [row for row in ood.samples("eval") if row["type"] == "comparison"]
    out = work / "ood" / "comparison_test.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows[:n]


def real_index(work: Path) -> Path | None:
    """The HotpotQA-400 corpus (union of its context paragraphs) indexed with tantivy, built once."""
    from agent_r1.data.corpus import build_corpus_from_hotpotqa

    src = SAMPLES / REAL_SETS["hotpotqa"]
    if not src.exists():
        return None
    index_dir = work / "hotpotqa_index"
    if not (index_dir / "retriever.json").exists():
        corpus = work / "hotpotqa_corpus.jsonl"
        corpus.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in build_corpus_from_hotpotqa(src)),
                          encoding="utf-8")
        build_index(corpus, index_dir, "tantivy")
    return index_dir


def evaluate_synthetic(model: Path, cfg, sets: dict[str, list[dict]], mode: str) -> tuple[dict, dict]:
    """(stats per dataset, EM 0/1 per question per dataset) of `model` in one mode; the per-question
    scores, in question order, feed the bootstrap intervals."""
    report = evaluate_model(model, cfg, sets, [mode], index_dir=cfg.search.index_dir, keep_trajectories=True)
    return report["results"][mode], em_per_question(report, mode)


def run_method(name: str, base: dict[str, Any], warm: Path, work: Path, sets: dict[str, list[dict]]) -> dict[str, Any]:
    label, over = METHODS[name]
    cfg = load_config(None, {**base, **over, "train.init_from": str(warm), "train.out_dir": str(work / "runs" / name)})
    start = time.perf_counter()
    curve: list[dict[str, float]] = []
    result = run_train(cfg, on_iteration=lambda it, m: curve.append(
        {"iteration": it, "reward_mean": m["reward_mean"], "em": m["em"]}))
    train_s = time.perf_counter() - start
    final = sorted((work / "runs" / name / "checkpoints").glob("iter_*"))[-1]
    metrics, per_q = evaluate_synthetic(final, cfg, sets, "agent")
    return {"label": label, "overrides": over, "config_hash": config_hash(cfg.to_dict()), "checkpoint": str(final),
            "iterations": result["iterations"], "train_seconds": round(train_s, 1),
            "wall_seconds": round(time.perf_counter() - start, 1), "metrics": metrics, "em_per_question": per_q,
            "train_curve": curve}


def model_params(path: Path) -> int:
    from agent_r1.models.build import load_model

    model, _ = load_model(path)
    return sum(p.numel() for p in model.parameters())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--micro", action="store_true", help="CI smoke: tiny model, 5 SFT steps, 1 iteration, "
                                                         f"n=4, RL methods {MICRO_METHODS} only")
    ap.add_argument("--work", default=None, help="work folder (default benchmarks/.work/paper_table[_micro])")
    ap.add_argument("--results-dir", default=None,
                    help="where paper_table.{md,json} go (default benchmarks/results; --micro: WORK/results)")
    ap.add_argument("--methods", default=None, help=f"comma list of {list(METHODS)}")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--sft-steps", type=int, default=None)
    ap.add_argument("--eval-n", type=int, default=None, help="questions per synthetic eval set")
    ap.add_argument("--real-n", type=int, default=None, help="questions per real data set (0: skip real data)")
    ap.add_argument("--warm-start", default=None, help="reuse this SFT model folder instead of training one "
                                                       "(it must come from the same data and model config); "
                                                       "'{seed}' in it stands for each seed, e.g. the learning "
                                                       "benchmark's benchmarks/.work/learn_np12k/seed{seed}/sft/model")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite paper_table.md and .png from the JSON in the results folder; run nothing")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", default="0", help="comma list; each seed is its own world, warm start and RL runs, "
                                                 "and the table shows means with 95%% bootstrap intervals")
    args = ap.parse_args(argv)
    micro = args.micro
    args.iterations = args.iterations or (1 if micro else 60)
    args.sft_steps = args.sft_steps or (5 if micro else 500)
    args.eval_n = args.eval_n or (4 if micro else 200)
    args.real_n = (2 if micro else 400) if args.real_n is None else args.real_n
    # the learning benchmark's budget and warm-start recipe; a cosine decay, the last checkpoint read after it
    args.prompts_per_iter, args.n_samples = (4, 2) if micro else (16, 4)
    args.guess_fraction, args.lr_schedule = 0.6, "cosine"
    args.methods = (args.methods or ",".join(MICRO_METHODS if micro else METHODS)).split(",")
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        ap.error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    args.seeds = [int(x) for x in str(args.seeds).split(",")]
    if args.warm_start and len(args.seeds) > 1 and "{seed}" not in args.warm_start:
        ap.error("--warm-start without '{seed}' reuses one warm start: it needs a single seed")
    return args


def results_header(args: argparse.Namespace, argv: list[str] | None, work: Path, results: Path) -> dict[str, Any]:
    """The results document before any run: command, budget, base config, what earlier runs kept."""
    command = "python -m benchmarks.paper_table " + " ".join(argv if argv is not None else sys.argv[1:])
    res: dict[str, Any] = {
        "command": command.strip(), "seeds": args.seeds, "machine": machine(),
        "budget": {"iterations": args.iterations, "prompts_per_iter": args.prompts_per_iter,
                   "n_samples": args.n_samples, "sft_steps": args.sft_steps, "guess_fraction": args.guess_fraction},
        "base_config": base_overrides(work / "seed<S>", args), "per_seed": {}, "real": None,
    }
    # what a kept result must share with this run (seeds, methods and real data may differ: they are
    # kept per seed and per method), so a table of many hours can be filled in over several sessions
    res["resume_key"] = config_hash({"base": res["base_config"], "eval_n": args.eval_n, "warm_start": args.warm_start})
    earlier = previous_doc(results / "paper_table.json", res["resume_key"])
    kept = earlier.get("per_seed", {})
    # the wall time of every call that filled this table, this one last (save() appends it; a file from before
    # had one total); the header's wall time is their sum
    res["wall_seconds_per_call"] = earlier.get("wall_seconds_per_call", [earlier["wall_seconds"]] if earlier else [])
    for seed in sorted(map(int, kept)):  # in the file from the start: a run killed early loses none of them
        res["per_seed"][str(seed)] = kept[str(seed)]
    res["seeds"] = sorted(set(args.seeds) | set(map(int, kept)))
    res["config_hash"] = config_hash({"base": res["base_config"], "methods": {m: METHODS[m][1] for m in args.methods},
                                      "seeds": res["seeds"], "eval_n": args.eval_n, "real_n": args.real_n,
                                      "warm_start": args.warm_start})
    return res


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.work or work_dir("paper_table_micro" if args.micro else "paper_table"))
    results = Path(args.results_dir or (work / "results" if args.micro else results_dir()))
    if args.render_only:
        done = json.loads((results / "paper_table.json").read_text())
        (results / "paper_table.md").write_text(render_markdown(done))
        plot_paper_table(done, results / "paper_table.png")
        return 0
    results.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    set_threads(args.threads)
    res = results_header(args, argv, work, results)
    kept, before = dict(res["per_seed"]), list(res["wall_seconds_per_call"])

    def save() -> None:
        res["wall_seconds_per_call"] = [*before, round(time.perf_counter() - t_start, 1)]
        res["wall_seconds"] = round(sum(res["wall_seconds_per_call"]), 1)
        res["load"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
        write_json(results / "paper_table.json", res)
        (results / "paper_table.md").write_text(render_markdown(res))

    for seed in args.seeds:
        run_seed(seed, work / f"seed{seed}", args, args.methods, res, save, kept.get(str(seed), {}))
    if args.real_n:
        res["real"] = real_data(work, res, args.real_n)
        print(format_table(res["real"]["reports"]["SFT warm start"]), flush=True)
    save()
    plot_paper_table(res, results / "paper_table.png")
    print((results / "paper_table.md").read_text())
    return 0


def previous_doc(path: Path, resume_key: str) -> dict[str, Any]:
    """What an earlier run of the same setup wrote to `path` (per seed, its baselines and methods), or {}."""
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    return old if old.get("resume_key") == resume_key else {}


def run_seed(seed: int, work: Path, args: argparse.Namespace, methods: list[str], res: dict[str, Any],
             save: Callable[[], None], kept: dict[str, Any]) -> None:
    """One seed: its world, index and warm start, the baselines, then every RL method from that warm
    start; what `kept` (this seed's earlier results, same setup) holds is not run again."""
    base = {**base_overrides(work, args), "seed": seed}
    cfg = load_config(None, base)
    run = Run(cfg)
    run.index_dir  # the seed's world, then its index
    warm = Path(args.warm_start.replace("{seed}", str(seed))) if args.warm_start else work / "sft" / "model"
    sft_s, warm_reused = kept.get("sft_seconds", 0.0), warm.exists()
    if not warm.exists():
        if args.warm_start:
            raise SystemExit(f"--warm-start {warm} does not exist for seed {seed}; train it (for example with "
                             f"python -m benchmarks.learning --seeds {seed}) or leave --warm-start out")
        t0 = time.perf_counter()
        warm = run_sft(cfg)
        sft_s = time.perf_counter() - t0
    sets = {"synthetic_test": run.samples("eval", args.eval_n),
            "synthetic_comparison_ood": ood_questions(cfg, work, args.eval_n)}
    res["datasets"] = {k: len(v) for k, v in sets.items()}
    res.setdefault("model_params", model_params(warm))
    # kept results go in before anything is saved, so every save holds them (the table only grows;
    # methods are kept even when not asked for now)
    one = res["per_seed"][str(seed)] = {
        "base": base, "warm_start": rel(warm), "warm_start_reused": warm_reused, "sft_seconds": round(sft_s, 1),
        "baselines": {m: r for m, r in kept.get("baselines", {}).items() if m in BASELINES},
        "methods": {m: r for m, r in kept.get("methods", {}).items()
                    if r.get("overrides") == METHODS.get(m, (None, None))[1]}}
    for mode, label in BASELINES.items():
        if mode in one["baselines"]:
            continue
        start = time.perf_counter()
        metrics, per_q = evaluate_synthetic(warm, cfg, sets, mode)
        one["baselines"][mode] = {"label": label, "metrics": metrics, "em_per_question": per_q,
                                  "wall_seconds": round(time.perf_counter() - start, 1)}
        print(f"seed {seed} {mode}: " + json.dumps({d: round(s["em"], 1) for d, s in metrics.items()}), flush=True)
    save()
    for name in methods:
        if name in one["methods"]:
            print(f"seed {seed} {name}: kept from the results file", flush=True)
            continue
        one["methods"][name] = run_method(name, base, warm, work, sets)
        print(f"seed {seed} {name}: " + json.dumps({d: round(s["em"], 1)
                                                    for d, s in one["methods"][name]["metrics"].items()})
              + f" ({one['methods'][name]['wall_seconds']:.0f}s)", flush=True)
        save()


def real_data(work: Path, res: dict[str, Any], real_n: int) -> dict[str, Any] | None:
    """The harness on the real data samples, for the first seed's warm start and its best RL model."""
    index_dir = real_index(work)
    if index_dir is None:
        return None
    one = res["per_seed"][str(res["seeds"][0])]
    real_cfg = load_config(None, {**one["base"], "search.index_dir": str(index_dir)})
    real_sets = {name: load_question_set(SAMPLES / rel, real_n) for name, rel in REAL_SETS.items()
                 if (SAMPLES / rel).exists()}
    real = {"n": real_n, "num_docs": json.loads((index_dir / "retriever.json").read_text()).get("num_docs"),
            "reports": {}}
    start = time.perf_counter()
    warm = ROOT / one["warm_start"] if not Path(one["warm_start"]).is_absolute() else Path(one["warm_start"])
    real["reports"]["SFT warm start"] = evaluate_model(warm, real_cfg, real_sets, ["direct", "rag", "agent"],
                                                       index_dir=index_dir)
    if one["methods"]:
        best = max(one["methods"], key=lambda m: one["methods"][m]["metrics"]["synthetic_test"]["em"])
        real["reports"][f"best RL ({best})"] = evaluate_model(Path(one["methods"][best]["checkpoint"]), real_cfg,
                                                              real_sets, ["agent"], index_dir=index_dir)
    real["wall_seconds"] = round(time.perf_counter() - start, 1)
    return real


# --- the markdown and the figure: Tables 3 and 4 with intervals ------------------------------------------
# Every cell is the mean EM over seeds and questions with its 95% two-level bootstrap interval
# (agent_r1/evaluation/stats.py); the differences table bootstraps each comparison paired (same seeds, same
# questions) and says whether its interval excludes 0. The figure: held-out EM per method, the mean over
# seeds with its interval, and each seed's own score as a dot.

ALGORITHMS = ("ppo", "grpo", "reinforce_pp", "reinforce_pp_baseline", "rloo")
# (ablation, the full method it removes something from), as in the paper's Table 4
ABLATIONS = (("ppo_adv_mask_off", "ppo"), ("ppo_masks_off", "ppo"), ("ppo_loss_mask_off", "ppo"),
             ("grpo_loss_mask_off", "grpo"), ("ppo_process_on", "ppo"), ("ppo_process_off", "ppo_process_on"))
BEYOND = tuple(objective_rows.OBJECTIVES)  # rows beyond the paper, each compared with GRPO (the recipe they modify)


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
    threads = res["machine"].get("torch_threads", res["machine"].get("cpus"))  # "cpus" in older result files
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


if __name__ == "__main__":
    sys.exit(main())
