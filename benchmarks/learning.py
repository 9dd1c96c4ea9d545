"""Learning benchmark: does RL lift held-out EM above an imperfect SFT warm start?

Synthetic multi-hop world (invented names), tantivy search, a ~1M-parameter Llama built here.
1. SFT on scripted demos where 60% of the demos answer by a guess (an imperfect start).
2. Held-out (test split, unseen people) greedy EM, sampled EM and search-first rate.
3. RL from that same warm start for each variant (GRPO, PPO with a critic, GRPO with the loss
   mask off, GRPO with shuffled rewards as a control), then the same evaluation.
Writes benchmarks/results/learning.json. Long: run it as a benchmark, not in CI.

    python -m benchmarks.learning --seeds 0,1,2 --variants grpo,ppo,grpo_shuffled_rewards
                                                  # the README's figures (about 65 min on 2 idle cores)
    python -m benchmarks.learning                 # seed 0, every default variant
    python -m benchmarks.learning --quick         # a short version (a few minutes; writes learning_quick.json)
    python -m benchmarks.learning --smoke         # micro model and world, 1 iteration (seconds; learning_smoke.json)
    python -m benchmarks.learning --params params.yaml --seeds 0,1,2 \
        --variants grpo,gspo,cispo,dr_grpo,dapo,gigpo --work benchmarks/.work/objectives \
        --out benchmarks/results/learning_objectives.json   # the objectives' rows, on make run's recipe
    python -m benchmarks.learning --params params.yaml --chat --seeds 0,1,2 \
        --variants grpo_hermes,grpo_endpoint --work benchmarks/.work/endpoint_sft2000 \
        --out benchmarks/results/learning_endpoint.json     # the endpoint rows (benchmarks/endpoint_rows.py)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import yaml

from agent_r1.config import load_config, parse_overrides
from agent_r1.evaluation.harness import em_per_question, evaluate_model
from agent_r1.evaluation.stats import mean_ci, paired_difference_ci
from agent_r1.runs.assembly import set_threads
from agent_r1.runs.run import Run, run_train
from agent_r1.runs.warm_start import run_sft
from benchmarks import endpoint_rows, objective_rows
from benchmarks.common import ROOT, machine, micro_overrides, result_path, work_dir, write_json

VARIANTS = {
    "grpo": {"algo.adv_estimator": "grpo"},
    "ppo": {"algo.adv_estimator": "gae", "algo.lam": 0.95},
    # loss mask off alone: observation tokens enter the loss but carry advantage 0 (the advantage
    # mask still holds), so they only dilute the token mean; with both masks off they are trained
    # on as if the policy had written them
    "grpo_loss_mask_off": {"algo.adv_estimator": "grpo", "algo.loss_mask": False},
    "grpo_masks_off": {"algo.adv_estimator": "grpo", "algo.loss_mask": False, "algo.advantage_mask": False},
    "grpo_shuffled_rewards": {"algo.adv_estimator": "grpo"},  # control: see shuffle_scores below
    # asynchronous: the next iteration's rollout runs on a Ray worker while the learner updates
    # (the target: held-out EM within 3 points of synchronous GRPO at equal iterations)
    "grpo_async1": {"algo.adv_estimator": "grpo", "ray.enabled": True, "ray.num_workers": 1,
                    "train.max_staleness": 1},
    # the objectives the field trains with now (benchmarks/objective_rows.py)
    **{name: over for name, (_, over) in objective_rows.OBJECTIVES.items()},
    **endpoint_rows.VARIANTS,  # built-in env vs the endpoint's openai agent (needs --chat)
}
DEFAULT_VARIANTS = ("grpo", "ppo", "grpo_loss_mask_off", "grpo_masks_off", "grpo_shuffled_rewards")
# per iteration, beside reward and EM: the endpoint's costs, and how many prompts DAPO's dynamic sampling rolled
# out to fill its batch (its extra rollout work; other rows roll out train.prompts_per_iter)
CURVE_KEYS = (*endpoint_rows.CURVE_KEYS, "dynamic/prompts_sampled", "dynamic/rounds")


def evaluate(cfg, model_dir: Path, samples, greedy: bool) -> dict:
    """Held-out stats, plus EM 0/1 per question (`em_per_question`) for the seed intervals."""
    report = evaluate_model(model_dir, cfg, {"test": samples}, ["agent"], greedy=greedy, keep_trajectories=True)
    return {**report["results"]["agent"]["test"], "em_per_question": em_per_question(report, "agent")["test"]}


def shuffle_scores(trainer) -> None:
    """Control: rewards are permuted across the batch, so any gain must come from elsewhere."""
    prepare = trainer.prepare
    rng = random.Random(0)

    def shuffled(trajs, *args, **kwargs):  # the trainer's own options (e.g. deferred old log-probs) pass through
        rewards = [t.outcome_reward for t in trajs]
        rng.shuffle(rewards)
        for t, r in zip(trajs, rewards):
            t.outcome_reward = r
        return prepare(trajs, *args, **kwargs)

    trainer.prepare = shuffled


def previous_results(path: Path, base: dict, recipe: dict | None = None) -> dict | None:
    """Results already in `path` for the same config (and params file values), so a long benchmark can
    run a variant at a time (or continue after an interruption) without redoing the others."""
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return old if old.get("config") == base and old.get("recipe") == recipe else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="the micro model and world, 1 iteration (the smoke tests)")
    ap.add_argument("--work", default=None, help="relative to the repo root (default benchmarks/.work/learn_np12k[_quick])")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"comma list of {list(VARIANTS)}")
    ap.add_argument("--seeds", default="0", help="comma list: each seed is its own world, warm start and runs")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--out", default=None, help="default benchmarks/results/learning[_quick].json")
    ap.add_argument("--params", default=None,
                    help="run a params file's recipe (e.g. params.yaml: make run's) instead of this benchmark's own; "
                         "only the seed's folders and the evaluation are set over it")
    ap.add_argument("--chat", action="store_true",
                    help="the chat recipe every run shares (endpoint_rows.CHAT_RECIPE: "
                         f"{endpoint_rows.CHAT_RECIPE}); the endpoint rows need it")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra config override for every run, e.g. --set model.tokenizer=bpe")
    args = ap.parse_args(argv)
    unknown = [n for n in args.variants.split(",") if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    return args


def base_config(args: argparse.Namespace, work: Path) -> dict:
    """The overrides every run of a seed shares (the seed's folders are set by run_seed)."""
    # 80 iterations with the rate decayed to 0 (cosine): held-out EM read off the last checkpoint
    # swung by +-10 points between neighbouring iterations at a constant rate (a probe on seed 1:
    # 51 at iteration 60 constant, 69-79 at 25-125 on a cosine over 150); PPO's 80 iterations fit
    # in 10 minutes of RL on 2 idle cores
    chat = endpoint_rows.CHAT_RECIPE if args.chat else {}
    if args.params:  # the file's recipe; this benchmark sets only where the seed's things live and the eval
        return {"data.dir": str(work / "data"), "search.index_dir": str(work / "index"), "sft.out_dir": str(work / "sft"),
                "train.eval_every": 0, "train.eval_size": 100, "train.checkpoint_every": 1000,
                **chat, **parse_overrides(args.set)}
    small = args.quick or args.smoke
    iterations = args.iterations or (1 if args.smoke else 4 if args.quick else 80)
    sft_steps = 2 if args.smoke else 40 if args.quick else 500
    micro = {k: v for k, v in micro_overrides(work).items()
             if k.startswith(("data.n_", "model.", "rollout.max"))} if args.smoke else {}
    return {  # the chat recipe first: this benchmark's own SFT steps (2 in --smoke) win over its 2,000
        **chat,
        "data.dir": str(work / "data"), "search.index_dir": str(work / "index"), "model.tokenizer": "syllable",
        "data.question_types": ["one_hop", "bridge"], "data.n_people": 12000, "sft.out_dir": str(work / "sft"),
        "search.k": 3,
        "sft.steps": sft_steps, "sft.guess_fraction": 0.6, "train.threads": 2,  # 60% of the demos guess
        # RL learning rate: 1e-3 collapsed the policy here
        "train.iterations": iterations, "train.prompts_per_iter": 16, "rollout.n_samples": 4, "train.lr": 3e-4,
        # the recorded results' update: params.yaml's make-run recipe since moved to mini-batches of 128
        # and skip_zero_advantage, which would change these runs at float level (and refuse a KL term)
        "train.minibatch_size": 64, "algo.skip_zero_advantage": False,
        "train.lr_schedule": "cosine",
        "env.format_instructions": False, "train.eval_every": 0, "train.eval_size": 20 if small else 100,
        "train.checkpoint_every": 1000,
        **micro, **({"train.prompts_per_iter": 2, "rollout.n_samples": 2, "train.eval_size": 4,
                     "sft.batch_size": 4, "train.runs_dir": str(work / "runs")} if args.smoke else {}),
        **parse_overrides(args.set),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(ROOT)  # config paths stay relative, so results from any clone compare equal
    suffix = "_quick" if args.quick else "_smoke" if args.smoke else ""  # a smoke run never overwrites the figures
    work = Path(args.work or work_dir(f"learn_np12k{suffix}"))  # the 12,000-people world
    out = Path(args.out or result_path(f"learning{suffix}"))
    base = base_config(args, work)
    seeds = [int(x) for x in args.seeds.split(",")]
    recipe = yaml.safe_load(Path(args.params).read_text()) if args.params else None  # the file's values
    results = (previous_results(out, base, recipe)
               or {"machine": machine(), "config": base, "recipe": recipe, "params": args.params, "per_seed": {}})
    results["seeds"] = sorted(set(results.get("seeds", [])) | set(seeds))

    def save() -> None:
        summarise(results)
        write_json(out, results)

    for seed in seeds:
        run_seed(seed, work / f"seed{seed}", {**base, "seed": seed}, args.params, args.variants.split(","),
                 results["per_seed"].setdefault(str(seed), {"runs": {}}), save)
    save()
    print(json.dumps(results["summary"], indent=1))
    return 0


def run_seed(seed: int, work: Path, base: dict, params: str | None, names: list[str], one: dict, save) -> None:
    """One seed: its world, index and warm start (trained once, kept in `work`), then the variants."""
    for key in ("data.dir", "search.index_dir", "sft.out_dir"):
        base[key] = str(work / Path(base[key]).name)
    cfg = load_config(params, base)
    endpoint_rows.check_recipe(names, cfg)
    set_threads(cfg.train.threads)
    warm = work / "sft" / "model"
    timing = work / "sft" / "sft_seconds.txt"
    if not warm.exists():
        t0 = time.perf_counter()
        run_sft(cfg)
        timing.write_text(f"{time.perf_counter() - t0:.1f}")
    run = Run(cfg)
    run.index_dir  # the seed's world, then its index
    test = run.samples("eval", cfg.train.eval_size)
    if "warm_start" not in one:
        one["warm_start"] = {"greedy": evaluate(cfg, warm, test, True), "sampled": evaluate(cfg, warm, test, False),
                             "sft_seconds": float(timing.read_text()) if timing.exists() else None}
    print(f"seed {seed} warm start: greedy EM {one['warm_start']['greedy']['em']:.1f}", flush=True)
    if "grpo_endpoint" in names and "episodes_check" not in one:  # the env's and the agent's ids, side by side
        one["episodes_check"] = endpoint_rows.compare_episodes(cfg, warm, test[:8])
        print(f"seed {seed} env vs endpoint agent, greedy: {one['episodes_check']}", flush=True)
    for name in names:
        if name in one["runs"]:
            print(f"seed {seed} {name}: kept from the results file", flush=True)
            continue
        one["runs"][name] = run_variant(name, params, base, warm, work, test)
        print(f"seed {seed} {name}: greedy EM {one['runs'][name]['greedy']['em']:.1f} "
              f"({one['runs'][name]['rl_seconds']:.0f} s of RL)", flush=True)
        save()


def run_variant(name: str, params: str | None, base: dict, warm: Path, work: Path, test: list) -> dict:
    run_cfg = load_config(params, {**base, **VARIANTS[name], "train.init_from": str(warm),
                                 "train.out_dir": str(work / "runs" / name)})
    from agent_r1.training import trainer as trainer_mod

    original = trainer_mod.RLTrainer.__init__
    if name == "grpo_shuffled_rewards":
        def patched(self, *a, **k):
            original(self, *a, **k)
            shuffle_scores(self)
        trainer_mod.RLTrainer.__init__ = patched
    curve = []
    start = time.perf_counter()
    with endpoint_rows.agent_tools(run_cfg, warm):  # an openai agent's search service (else nothing)
        try:
            run_train(run_cfg, on_iteration=lambda it, m: curve.append(
                {"iteration": it, "reward_mean": m["reward_mean"], "em": m["em"],
                 "search_first_rate": m["search_first_rate"], "seconds": round(time.perf_counter() - start, 2),
                 **{k: m[k] for k in CURVE_KEYS if k in m}}))
        finally:
            trainer_mod.RLTrainer.__init__ = original
        rl_seconds = time.perf_counter() - start
        final_dir = sorted((work / "runs" / name / "checkpoints").glob("iter_*"))[-1]
        # every row by the built-in env (the same evaluator); an agent's row through its agent too
        through_agent = {"greedy_agent": evaluate(run_cfg, final_dir, test, True)} \
            if run_cfg.env.kind == "openai_agent" else {}
    eval_cfg = endpoint_rows.builtin(run_cfg)
    if through_agent:  # the trained policy searches: the env's and the agent's multi-turn ids, side by side
        through_agent["episodes_check"] = endpoint_rows.compare_episodes(eval_cfg, final_dir, test[:8])
    return {"greedy": evaluate(eval_cfg, final_dir, test, True),
            "sampled": evaluate(eval_cfg, final_dir, test, False), **through_agent, "rl_seconds": rl_seconds, "iterations": run_cfg.train.iterations, "train_curve": curve,
            "load_after": os.getloadavg()}


def summarise(results: dict) -> None:
    """Across seeds: held-out greedy EM mean, spread (min, max) and the 95% bootstrap interval over
    seeds and questions, per variant and for the warm start; `runs`/`warm_start` mirror the first seed
    (what bench-learning.png draws)."""
    seeds = [s for s in map(str, results["seeds"]) if s in results["per_seed"]]
    rows = {"warm_start": [results["per_seed"][s].get("warm_start") for s in seeds]}
    for name in VARIANTS:
        rows[name] = [results["per_seed"][s]["runs"].get(name) for s in seeds]
    summary = {}
    for name, per in rows.items():
        per = [p for p in per if p]
        if not per:
            continue
        ems = [p["greedy"]["em"] for p in per]
        summary[name] = {"seeds": len(per), "greedy_em_mean": sum(ems) / len(ems), "greedy_em_min": min(ems),
                         "greedy_em_max": max(ems),
                         "greedy_em_ci95": mean_ci([[100.0 * x for x in p["greedy"]["em_per_question"]]
                                                    for p in per]).to_dict()}
        if name != "warm_start":
            summary[name]["rl_seconds_mean"] = sum(p["rl_seconds"] for p in per) / len(per)
    for name in summary:  # paired against GRPO (or its PAIRED_WITH row) over the seeds both have: same worlds,
        base = endpoint_rows.PAIRED_WITH.get(name, "grpo")  # warm starts and questions
        both = [(rows[name][i], rows[base][i]) for i in range(len(seeds))
                if name not in (base, "warm_start") and rows[name][i] and rows[base][i]]
        if both:
            diff = paired_difference_ci([[100.0 * x for x in a["greedy"]["em_per_question"]] for a, _ in both],
                                        [[100.0 * x for x in g["greedy"]["em_per_question"]] for _, g in both])
            summary[name][f"minus_{base}_ci95"] = {**diff.to_dict(), "seeds": len(both)}
    endpoint_rows.summarise_seconds(summary, rows)
    results["summary"] = summary
    if seeds:
        first = results["per_seed"][seeds[0]]
        results["warm_start"], results["runs"] = first.get("warm_start"), first["runs"]


if __name__ == "__main__":
    sys.exit(main())
