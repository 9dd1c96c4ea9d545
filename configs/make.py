"""Presets as full params files (params.yaml plus a few keys): the Agent-R1 paper's recipe (its
Table 3 setup) in configs/paper/, and the objectives the field trains with now (DAPO, GSPO, Dr. GRPO,
CISPO, GiGPO) on the same setup in configs/recipes/.

`load_config` reads one params file and dotted overrides, so a preset is written out whole: this
script merges params.yaml with each preset's keys below and writes configs/<group>/<name>.yaml. The
keys live only here, so the files never drift from params.yaml: rerun after editing either one
(tests/config/test_paper_presets.py and test_recipe_presets.py fail when a file differs from what
this script writes).

    python configs/make.py            # (re)write every preset
    python configs/make.py --check    # exit 1 if a committed preset is stale

Then: `agent-r1 train --params configs/paper/grpo.yaml` (add `--set model.lora.r=16` for LoRA), or
`agent-r1 train --params configs/recipes/dapo.yaml`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PROMPTS_PER_ITER = 128  # the paper's batch: 128 questions per iteration
MINIBATCH_PROMPTS = 64  # its mini-batch: 64 questions (verl counts mini-batches in prompts, times n)
GROUP_N = 5  # GRPO / RLOO / REINFORCE++-baseline sample 5 answers per question

#: what every preset shares: Qwen2.5-3B-Instruct from the hub, its native hermes tool calls, one
#: search tool (top 5), the HotpotQA + 2Wiki training mix, reward = EM when an answer was given, else
#: format score 0 minus 1; actor lr 1e-6, critic lr 1e-5, KL 0.001 (low-variance k3, as a loss term);
#: 4 turns; bf16 over float32 master weights, gradient checkpointing, micro-batches of 4 rows.
COMMON: dict[str, Any] = {
    "model.name_or_path": "Qwen/Qwen2.5-3B-Instruct",
    "model.dtype": "bfloat16",  # loaded in bf16 (half the load peak); trained weights are upcast to float32
    "model.gradient_checkpointing": True,
    "data.source": "hotpotqa_2wiki",  # a prepared folder: see docs/real-models.md for how to build the mix
    "data.dir": "data/hotpotqa_2wiki",
    "data.train_file": "train.jsonl",
    "data.eval_file": "dev.jsonl",  # in-domain dev; MuSiQue (out of domain) is evaluated with `agent-r1 eval`
    "search.index_dir": "data/hotpotqa_2wiki/index",
    "search.k": 5,
    "env.format": "hermes",
    "env.tools": ["search"],
    "env.format_instructions": False,  # Qwen2.5's chat template lists the tool itself
    "rollout.max_turns": 4,
    # token budgets for a real model (params.yaml's are sized for a 1M-parameter toy): Agent-R1's
    # scripts allow 1,024 tokens per turn; 4 turns of action + top-5 passages fit in 4,096
    "rollout.max_tokens_per_turn": 1024,
    "rollout.max_observation_tokens": 512,
    "rollout.max_total_tokens": 4096,
    "rollout.temperature": 1.0,
    "reward.metric": "em",
    "reward.format_penalty": -1.0,  # no answer: format score 0, minus 1
    "reward.process_reward": False,  # the Table 3 runs use the outcome reward only
    "algo.policy_loss": "ppo",
    "algo.kl_coef": 0.001,
    "algo.kl_kind": "k3",  # verl's low_var_kl
    "algo.kl_in_reward": False,  # a loss term (verl use_kl_loss), as Agent-R1's scripts
    "algo.skip_zero_advantage": False,  # params.yaml skips them, but the KL loss term gives those rows a gradient
    "algo.critic_lr": 1e-5,
    "algo.loss_mask": True,
    "algo.advantage_mask": True,
    "train.lr": 1e-6,
    "train.lr_schedule": "constant",  # verl's default; params.yaml decays its toy runs (cosine)
    "train.prompts_per_iter": PROMPTS_PER_ITER,
    "train.ppo_epochs": 1,  # verl's default, which Agent-R1's scripts keep
    "train.precision": "bf16",
    "train.micro_batch_size": 4,
    "train.device": "auto",
    "train.init_from": "",  # RL straight from the instruct model: no SFT warm start
    "train.eval_every": 10,
}


def _algo(estimator: str, n: int) -> dict[str, Any]:
    return {"algo.adv_estimator": estimator, "rollout.n_samples": n, "train.minibatch_size": MINIBATCH_PROMPTS * n}


#: preset name -> its own keys over COMMON (and over params.yaml)
PRESETS: dict[str, dict[str, Any]] = {
    "ppo": _algo("gae", 1),
    "grpo": _algo("grpo", GROUP_N),
    "reinforce_pp": _algo("reinforce_pp", 1),
    "reinforce_pp_baseline": _algo("reinforce_pp_baseline", GROUP_N),
    "rloo": _algo("rloo", GROUP_N),
    # the paper's ablations, on PPO: the advantage mask off, then the loss mask off too
    "ppo_advantage_mask_off": {**_algo("gae", 1), "algo.advantage_mask": False},
    "ppo_advantage_mask_off_loss_mask_off": {**_algo("gae", 1), "algo.advantage_mask": False,
                                             "algo.loss_mask": False},
}


#: the objectives of issue 33 on the paper's setup (COMMON): each with its reference's settings. None
#: has a critic; all but GiGPO drop the KL term, as their papers do.
RECIPES: dict[str, dict[str, Any]] = {
    # DAPO (Yu et al. 2025): clip-higher, token-mean loss, no KL, dynamic sampling (groups whose answers
    # all score alike are dropped and more questions drawn, up to 3 extra rounds of 128 questions), soft overlong
    # penalty over the last 20% of the trajectory budget (DAPO: 4,096 of 20,480 tokens)
    "dapo": {**_algo("grpo", GROUP_N), "algo.clip_low": 0.2, "algo.clip_high": 0.28, "algo.loss_agg": "token-mean",
             "algo.kl_coef": 0.0, "algo.dynamic_sampling.enabled": True, "algo.dynamic_sampling.max_extra_rounds": 3,
             "reward.overlong_buffer": 819, "reward.overlong_penalty": 1.0},
    # GSPO (Zheng et al. 2025): the sequence-level ratio, clipped in its own (narrow) range
    "gspo": {**_algo("grpo", GROUP_N), "algo.policy_loss": "gspo", "algo.clip_low": 3e-4, "algo.clip_high": 4e-4,
             "algo.loss_agg": "seq-mean-token-mean", "algo.kl_coef": 0.0},
    # Dr. GRPO (Liu et al. 2025): no std division, token sums over a constant (the 4,096-token budget)
    "dr_grpo": {**_algo("dr_grpo", GROUP_N), "algo.loss_agg": "seq-mean-token-sum-norm", "algo.kl_coef": 0.0},
    # CISPO (MiniMax-M1): clipped, detached importance weights; every token keeps its gradient
    # (weights capped at 5: TRL's cap, clip_high 4; no lower bound, as the paper)
    "cispo": {**_algo("grpo", GROUP_N), "algo.policy_loss": "cispo", "algo.clip_high": 4.0, "algo.kl_coef": 0.0},
    # GiGPO (Feng et al. 2025): GRPO plus step-level advantages over turns that saw the same evidence
    "gigpo": {**_algo("gigpo", GROUP_N), "algo.gigpo.step_weight": 1.0},
}

#: folder under configs/ -> its presets
GROUPS: dict[str, dict[str, dict[str, Any]]] = {"paper": PRESETS, "recipes": RECIPES}


def preset_keys(name: str, group: str = "paper") -> dict[str, Any]:
    """Every dotted key the preset sets over params.yaml (COMMON, then its own, then its run name:
    each run gets its folder runs/<group>/<name>[-N], a rerun a new one)."""
    return {**COMMON, **GROUPS[group][name], "train.experiment": group, "train.run_name": name}


def render(name: str, group: str = "paper", params: Path = ROOT / "params.yaml") -> str:
    tree = yaml.safe_load(params.read_text())
    for dotted, value in preset_keys(name, group).items():
        node = tree
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    own = "\n".join(f"#   {k}: {v}" for k, v in GROUPS[group][name].items())
    header = (f"# GENERATED by configs/make.py: params.yaml + the {group} preset {name!r}; edit make.py, not this\n"
              f"# file, then rerun it. This preset's own keys (over the shared paper keys in make.py):\n{own}\n")
    return header + yaml.safe_dump(tree, sort_keys=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a preset file differs from what this writes")
    args = ap.parse_args(argv)
    stale = []
    for group, presets in GROUPS.items():
        for name in presets:
            path, text = HERE / group / f"{name}.yaml", render(name, group)
            if args.check:
                if not path.exists() or path.read_text() != text:
                    stale.append(str(path.relative_to(ROOT)))
            else:
                path.parent.mkdir(exist_ok=True)
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"stale presets (rerun python configs/make.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
