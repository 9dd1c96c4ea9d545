"""Learning benchmark: does RL lift held-out EM above an imperfect SFT warm start?

Synthetic multi-hop world (invented names), tantivy search, a ~1M-parameter Llama built here.
1. SFT on scripted demos where `--guess-fraction` of demos answer by a guess (imperfect start).
2. Held-out (test split, unseen people) greedy EM, sampled EM and search-first rate.
3. RL from that same warm start for each variant (GRPO, PPO with a critic, GRPO with the loss
   mask off, GRPO with shuffled rewards as a control), then the same evaluation.
Writes benchmarks/results/learning.json. Long: run it as a benchmark, not in CI.

    python benchmarks/learning.py                 # full (about 30-60 min on 2 cores)
    python benchmarks/learning.py --quick         # a smoke version (a few minutes; writes learning_quick.json)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_r1.config import load_config, parse_overrides  # noqa: E402
from agent_r1.evaluation.agent_eval import evaluate_policy  # noqa: E402
from agent_r1.models.build import load_model  # noqa: E402
from agent_r1.retrieval.base import open_index  # noqa: E402
from agent_r1.rollout.chat import ChatCodec  # noqa: E402
from agent_r1.rollout.engine import TransformersEngine  # noqa: E402
from agent_r1.runs.assembly import ensure_data, ensure_index, load_samples, make_env_factory, set_threads  # noqa: E402
from agent_r1.runs.sft import run_sft  # noqa: E402
from agent_r1.runs.train import run_train  # noqa: E402

VARIANTS = {
    "grpo": {"algo.adv_estimator": "grpo"},
    "ppo": {"algo.adv_estimator": "gae", "algo.lam": 0.95},
    # loss mask off alone: observation tokens enter the loss but carry advantage 0 (the advantage
    # mask still holds), so they only dilute the token mean; with both masks off they are trained
    # on as if the policy had written them
    "grpo_loss_mask_off": {"algo.adv_estimator": "grpo", "algo.loss_mask": False},
    "grpo_masks_off": {"algo.adv_estimator": "grpo", "algo.loss_mask": False, "algo.advantage_mask": False},
    "grpo_shuffled_rewards": {"algo.adv_estimator": "grpo"},  # control: see shuffle_scores below
}


def evaluate(cfg, model_dir: Path, samples, greedy: bool) -> dict:
    model, tok = load_model(model_dir)
    retriever = open_index(cfg.search.index_dir)
    try:
        return evaluate_policy(TransformersEngine(model, tok), ChatCodec(tok), make_env_factory(cfg, retriever),
                               samples, cfg.rollout, cfg.reward, greedy=greedy, seed=cfg.seed)
    finally:
        retriever.close()


def shuffle_scores(trainer) -> None:
    """Control: rewards are permuted across the batch, so any gain must come from elsewhere."""
    prepare = trainer.prepare
    rng = random.Random(0)

    def shuffled(trajs):
        rewards = [t.outcome_reward for t in trajs]
        rng.shuffle(rewards)
        for t, r in zip(trajs, rewards):
            t.outcome_reward = r
        return prepare(trajs)

    trainer.prepare = shuffled


def previous_results(path: Path, base: dict) -> dict | None:
    """Results already in `path` for the same config, so a long benchmark can run a variant at a
    time (or continue after an interruption) without redoing the others."""
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return old if old.get("config") == base else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default=None, help="relative to the repo root (default benchmarks/.work/learning[_quick])")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--sft-steps", type=int, default=None)
    ap.add_argument("--guess-fraction", type=float, default=0.6)
    ap.add_argument("--lr", type=float, default=3e-4, help="RL learning rate (1e-3 collapsed the policy here)")
    ap.add_argument("-k", type=int, default=3, help="documents per search")
    ap.add_argument("--out", default=None, help="default benchmarks/results/learning[_quick].json")
    ap.add_argument("--rerun", action="store_true",
                    help="run every variant again even if --out already holds it for the same config")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra config override for every run, e.g. --set model.tokenizer=bpe")
    args = ap.parse_args()
    os.chdir(ROOT)  # config paths stay relative, so results from any clone compare equal
    suffix = "_quick" if args.quick else ""  # a smoke run never overwrites the full figures
    work = Path(args.work or f"benchmarks/.work/learning{suffix}")
    args.out = args.out or f"benchmarks/results/learning{suffix}.json"
    iterations = args.iterations or (4 if args.quick else 100)
    sft_steps = args.sft_steps or (40 if args.quick else 500)
    base = {
        "data.dir": str(work / "data"), "search.index_dir": str(work / "index"), "model.tokenizer": "syllable",
        "data.question_types": ["one_hop", "bridge"], "sft.out_dir": str(work / "sft"), "search.k": args.k,
        "sft.steps": sft_steps, "sft.guess_fraction": args.guess_fraction, "train.threads": 2,
        "train.iterations": iterations, "train.prompts_per_iter": 16, "rollout.n_samples": 4, "train.lr": args.lr,
        "env.format_instructions": False, "train.eval_every": 0, "train.eval_size": 100 if not args.quick else 20, "train.checkpoint_every": 1000,
        **parse_overrides(args.set),
    }
    cfg = load_config(None, base)
    set_threads(cfg.train.threads)
    t0 = time.perf_counter()
    warm = work / "sft" / "model"
    timing = work / "sft" / "sft_seconds.txt"
    if not warm.exists():
        run_sft(cfg)
        timing.write_text(f"{time.perf_counter() - t0:.1f}")
    sft_s = float(timing.read_text()) if timing.exists() else None
    data_dir = ensure_data(cfg)
    ensure_index(cfg, data_dir)
    test = load_samples(data_dir / cfg.data.eval_file, cfg.train.eval_size)
    results = previous_results(Path(args.out), base)
    if results is None:
        results = {
            "machine": {"cpus": torch.get_num_threads(), "python": platform.python_version(),
                        "torch": torch.__version__, "platform": platform.platform()},
            "config": base,
            "warm_start": {"greedy": evaluate(cfg, warm, test, True), "sampled": evaluate(cfg, warm, test, False),
                           "sft_seconds": sft_s},
            "runs": {},
        }
    print("warm start:", json.dumps(results["warm_start"]), flush=True)
    for name in args.variants.split(","):
        if name in results["runs"] and not args.rerun:
            print(f"{name}: kept from {args.out} (--rerun to run it again)", flush=True)
            continue
        run_cfg = load_config(None, {**base, **VARIANTS[name], "train.init_from": str(warm),
                                     "train.out_dir": str(work / "runs" / name)})
        start = time.perf_counter()
        from agent_r1.training import trainer as trainer_mod

        original = trainer_mod.RLTrainer.__init__
        if name == "grpo_shuffled_rewards":
            def patched(self, *a, **k):
                original(self, *a, **k)
                shuffle_scores(self)
            trainer_mod.RLTrainer.__init__ = patched
        curve = []
        try:
            run_train(run_cfg, on_iteration=lambda it, m: curve.append(
                {"iteration": it, "reward_mean": m["reward_mean"], "em": m["em"],
                 "search_first_rate": m["search_first_rate"]}))
        finally:
            trainer_mod.RLTrainer.__init__ = original
        final_dir = sorted((work / "runs" / name / "checkpoints").glob("iter_*"))[-1]
        results["runs"][name] = {
            "greedy": evaluate(run_cfg, final_dir, test, True),
            "sampled": evaluate(run_cfg, final_dir, test, False),
            "wall_seconds": time.perf_counter() - start,
            "iterations": iterations,
            "train_curve": curve,
        }
        print(name, json.dumps({k: v for k, v in results["runs"][name].items() if k != "train_curve"}), flush=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1))
    Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
