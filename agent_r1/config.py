"""One typed config tree, read from params.yaml (the single source of truth) plus overrides.

Unknown keys, wrong types (list and dict elements included), numbers out of range (`LIMITS`), unknown
choices and YAML aliases fail at start with the key named and what is allowed.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent_r1.algos.advantages import DynamicSamplingConfig, GiGPOConfig
from agent_r1.algos.losses import RolloutCorrectionConfig
from agent_r1.envs.factory import apply_kind_defaults, check_kind_keys
from agent_r1.envs.tool_env import EnvConfig
from agent_r1.models.build import ModelConfig
from agent_r1.retrieval.search import DENSE_INDEXES, RRF_MODES, SearchConfig
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.sampling import RolloutConfig
from agent_r1.schema import (  # noqa: F401  (parse_overrides: `--set KEY=VALUE`, part of the config's API)
    LIMITS,
    _set_path,
    build_section,
    check_limits,
    parse_overrides,
    safe_yaml,
)

PRECISIONS = ("auto", "fp32", "bf16")  # train.precision (agent_r1/precision.py)


@dataclass
class AlgoConfig:
    # chosen from registries (agent_r1/algos/: ADV_ESTIMATORS, POLICY_LOSSES, KL_PENALTIES; docs/extending.md)
    # gae | grpo | grpo_no_std | dr_grpo | rloo | reinforce_pp | reinforce_pp_baseline | gigpo
    # (dr_grpo: Dr. GRPO's advantage, r - group mean; pair it with loss_agg seq-mean-token-sum-norm)
    adv_estimator: str = "grpo"
    # ppo | vanilla | gspo (sequence-level ratio and clip: set clip_low 3e-4, clip_high 4e-4 and loss_agg
    # seq-mean-token-mean as the paper) | cispo (clipped detached IS weight on REINFORCE: weight <= 1 + clip_high,
    # no lower bound, clip_low unused; TRL/ScaleRL's cap 5.0 is clip_high 4.0) (algos/losses.py)
    policy_loss: str = "ppo"
    clip_low: float = 0.2  # ratio bounds [1 - clip_low, 1 + clip_high]: per token (ppo), per sequence (gspo)
    clip_high: float = 0.2
    dual_clip: float | None = None
    offpolicy_clip: float = 2.0  # truncation of the decoupled-PPO behaviour weight (train.max_staleness >= 1)
    loss_agg: str = "token-mean"  # token-mean | seq-mean-token-mean | seq-mean-token-sum | seq-mean-token-sum-norm
    # seq-mean-token-sum-norm's constant length L (Dr. GRPO): loss = sum of token losses / (rows x L), so no
    # sequence's own length scales its tokens' gradient; 0 = rollout.max_total_tokens. Other modes ignore it
    loss_norm_tokens: int = 0
    gamma: float = 1.0
    lam: float = 1.0
    kl_coef: float = 0.0
    kl_kind: str = "k3"  # k1 | k2 | k3 | abs
    kl_in_reward: bool = False  # True: subtract coef*KL from token rewards; False: add as a loss term
    entropy_coef: float = 0.0
    vf_clip: float | None = 0.2
    critic_lr: float = 1e-3
    # ablation switches from the paper
    loss_mask: bool = True  # False: train on every response token, observations included
    advantage_mask: bool = True  # False: advantages run over every response token
    # rows whose advantages are all 0 on their loss tokens (GRPO groups with equal rewards) skip the policy
    # forward/backward: their policy-loss gradient is exactly 0, so the update equals the one without
    # skipping (training/trainer.py). Entropy bonus and KL loss terms give such rows gradients:
    # it needs entropy_coef 0 and kl_coef 0 (or kl_in_reward, where the KL is inside the advantages)
    skip_zero_advantage: bool = False
    # engine/trainer log-prob gap correction in synchronous training (algos/losses.py)
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
    # the step-level (turn) part of adv_estimator gigpo (algos/advantages.py)
    gigpo: GiGPOConfig = field(default_factory=GiGPOConfig)
    # DAPO's dynamic sampling: all-equal groups dropped, more prompts rolled out (training/trainer.py)
    dynamic_sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)

    def __post_init__(self) -> None:
        if self.skip_zero_advantage and (self.entropy_coef != 0 or (self.kl_coef != 0 and not self.kl_in_reward)):
            raise ValueError(f"algo.skip_zero_advantage=true with algo.entropy_coef={self.entropy_coef} and "
                             f"algo.kl_coef={self.kl_coef} (kl_in_reward={self.kl_in_reward}): rows with zero "
                             "advantages still get gradients from the entropy bonus and the KL loss term, so "
                             "skipping them would change the update; set algo.entropy_coef: 0 and algo.kl_coef: 0 "
                             "(or algo.kl_in_reward: true), or algo.skip_zero_advantage: false")


@dataclass
class TrainConfig:
    iterations: int = 40
    prompts_per_iter: int = 16
    ppo_epochs: int = 2
    minibatch_size: int = 64  # trajectories per optimiser step
    lr: float = 3e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    eval_every: int = 10  # 0 = only at the end
    eval_size: int = 100
    # where the run writes: empty = a folder of its own, <runs_dir>/<experiment>/<run_name> (created
    # at start, never shared); set it to pin a folder (DVC's fixed outputs, tests)
    out_dir: str = ""
    run_name: str = ""  # empty = <adv_estimator>-<UTC time>-<4 hex>; the flow uses its flow run's name
    experiment: str = "agent-r1"  # the run folder's parent and the MLflow experiment
    runs_dir: str = "runs"  # run folders, and warm starts shared by runs (<runs_dir>/warm_starts/<hash>)
    # "sft" = the warm start for this config (trained once, then reused by every run whose data,
    # model, SFT and env settings match); a model folder; empty = a freshly built model
    init_from: str = ""
    threads: int = 2
    log_trajectories_every: int = 10  # sample trajectories to the metrics sink (e.g. an MLflow table)
    max_bad_updates: int = 3  # consecutive non-finite losses before the run stops
    # where and how tensors are computed (agent_r1/training/compute.py)
    device: str = "auto"  # auto (CUDA when visible) | cpu | cuda | cuda:N
    # auto (bf16 where the device computes it natively, else fp32) | fp32 | bf16 (autocast over float32
    # master weights and optimiser state; emulated on CPUs without bf16 instructions: a warning, and slow)
    precision: str = "auto"
    micro_batch_size: int = 0  # rows per forward/backward inside a mini-batch (0 = the whole mini-batch)
    # positions per output-head chunk in log-probs: with a 151,936-token vocabulary a chunk of 1,024
    # costs about 3 GiB (logits, softmax, recompute); lower it on small GPUs
    logit_chunk: int = 1024
    lr_schedule: str = "constant"  # constant | linear | cosine (over train.iterations, after the warmup)
    warmup_iterations: int = 0  # linear warmup from 0 to train.lr
    # asynchronous training (Ray): how many policy versions a batch may lag the update (0 = synchronous,
    # the exact on-policy loop; k >= 1: the next k iterations roll out while the learner updates)
    max_staleness: int = 0
    fsdp: bool = False  # shard the policy's decoder layers with FSDP2 over the learner ranks (CUDA only)


DEMO_STYLES = ("env", "chat")  # sft.demo_style: how the scripted demos write actions (training/demos.py)


@dataclass
class SFTConfig:
    steps: int = 400
    batch_size: int = 32
    lr: float = 2e-3
    guess_fraction: float = 0.6  # demos that answer by a guess instead of searching
    # env: actions as the env's format writes them, each ending where the built-in rollout stops; chat
    # (env.format hermes): as the chat template writes an assistant turn, tool calls in its tool_calls
    # rendering and every turn closed by its end-of-turn token, as an openai_agent's endpoint samples them
    demo_style: str = "env"
    out_dir: str = ""  # empty = <train.runs_dir>/warm_starts/<hash of what makes it>
    log_every: int = 50


@dataclass
class DataConfig:
    source: str = "synthetic"  # synthetic | a prepared folder's name
    dir: str = "data/synthetic"  # holds train.jsonl, dev.jsonl, test.jsonl, corpus.jsonl
    train_file: str = "train.jsonl"
    eval_file: str = "test.jsonl"
    n_people: int = 450  # synthetic world size
    question_types: tuple[str, ...] = ("one_hop", "bridge", "comparison")  # synthetic question types


@dataclass
class RayConfig:
    """Distributed training (agent_r1/training/ray_trainer.py); `enabled: false` trains in-process."""
    enabled: bool = False
    address: str = ""  # empty = start a local Ray in-process; "auto" or host:port = join a running cluster
    num_workers: int = 1  # rollout worker actors; each rolls out a contiguous shard of the prompts
    cpus_per_worker: float = 1.0  # also the worker's torch threads (rounded, at least 1)
    gpus_per_worker: float = 0.0
    learner_cpus: float = 1.0
    num_learners: int = 1  # data-parallel learner ranks (torch.distributed: gloo on CPU, NCCL on CUDA); 1 = one learner
    max_restarts: int = 3  # a dead rollout worker is restarted this many times; its shard is rolled out again
    num_cpus: int = 0  # local Ray only: logical CPUs (0 = enough for the actors, at least the machine's cores)
    temp_dir: str = ""  # local Ray only: empty = <repo>/.ray, or /tmp/agent-r1-ray-<uid> if that path is too long
    # local Ray only: true starts it without token auth, so any process that reaches this machine's Ray
    # ports may run code as you (its servers listen on every interface); only on a trusted, firewalled host
    insecure: bool = False


@dataclass
class ExperimentConfig:
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=lambda: RolloutConfig(n_samples=4))
    reward: RewardConfig = field(default_factory=RewardConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None,
                tree: dict[str, Any] | None = None) -> ExperimentConfig:
    """Reads params.yaml (if given; or a saved config `tree`, e.g. a run's config.json) and applies
    dotted overrides, then validates."""
    import copy

    tree = copy.deepcopy(tree) if tree is not None else {}
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"params file {str(p)!r} not found; pass --params PATH")
        tree = safe_yaml(p.read_text(), str(p)) or {}
        if not isinstance(tree, dict):
            raise ValueError(f"params file {str(p)!r} must hold a mapping at the top level")
    for dotted, value in (overrides or {}).items():
        _set_path(tree, dotted, value)
    move_renamed_keys(tree)
    apply_kind_defaults(tree)  # e.g. openai_agent: a template that renders tool calls, unless one is named
    config = build_section(ExperimentConfig, tree, "")
    validate(config)
    return config


# `ray.engine` chose the Ray workers' engine beside `rollout.engine` (then in-process only); one key,
# `rollout.engine`, chooses both now. A params file or a run folder's config.json written before loads.
OLD_RAY_ENGINE_DEFAULT = "auto"


def move_renamed_keys(tree: dict[str, Any]) -> None:
    """`ray.engine` as it acted: with `ray.enabled` it chose the workers' engine, so its value becomes
    `rollout.engine` (which then only chose the learner's evaluation engine: a learner evaluates with the
    transformers engine now); without Ray it did nothing and is dropped. Its old default (in every saved
    config.json) goes without a word, anything else with a warning that says what happened."""
    import warnings

    ray = tree.get("ray")
    if not isinstance(ray, dict) or "engine" not in ray:
        return
    value = ray.pop("engine")
    if value == OLD_RAY_ENGINE_DEFAULT:
        return
    if str(ray.get("enabled", False)).strip().lower() not in ("true", "1", "yes", "on"):
        warnings.warn(f"ray.engine={value!r} is ignored: it chose the Ray workers' engine and ray.enabled is off; "
                      "rollout.engine chooses the engine of every run now", UserWarning, stacklevel=3)
        return
    rollout = tree.setdefault("rollout", {})
    if not isinstance(rollout, dict):
        return  # the section's own type error is reported by build_section
    before = rollout.get("engine")
    rollout["engine"] = value
    replaced = f" (in place of rollout.engine={before!r}, which chose only the learner's evaluation engine)" \
        if before not in (None, value) else ""
    warnings.warn(f"ray.engine is renamed to rollout.engine; rollout.engine={value!r} is used{replaced}: write "
                  "that in the params file", UserWarning, stacklevel=3)


_FOLDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
RESERVED_FOLDERS = ("warm_starts",)  # <runs_dir>/warm_starts holds the shared warm starts, no runs


def check_folder_name(name: str, key: str) -> str:
    """A run or experiment name becomes a folder: no path separators, no '..', no hidden names."""
    if not _FOLDER_NAME.match(name) or name in RESERVED_FOLDERS:
        raise ValueError(f"{key}={name!r} is not a usable folder name: use letters, digits, '.', '_' and '-' "
                         f"(at most 100, starting with a letter or digit, not {list(RESERVED_FOLDERS)})")
    return name


def validate(c: ExperimentConfig) -> None:
    """Ranges of every number (`LIMITS`), choices from their registries, cross-field checks."""
    from agent_r1.algos import ADV_ESTIMATORS, AGG_MODES, KL_PENALTIES, POLICY_LOSSES
    from agent_r1.algos.schedules import LR_SCHEDULES
    from agent_r1.envs.factory import ENVS
    from agent_r1.envs.formats import FORMATS
    from agent_r1.models.build import ARCHS
    from agent_r1.models.chat_template import CHAT_TEMPLATES
    from agent_r1.models.tokenizer import PRE_TOKENIZERS
    from agent_r1.retrieval.base import RETRIEVERS
    from agent_r1.sampling import ENGINES

    check_limits(c)
    for key, value, registry in (  # registered by name: the registry says the choices and how to add one
        ("algo.adv_estimator", c.algo.adv_estimator, ADV_ESTIMATORS),
        ("algo.policy_loss", c.algo.policy_loss, POLICY_LOSSES), ("algo.kl_kind", c.algo.kl_kind, KL_PENALTIES),
        ("env.kind", c.env.kind, ENVS), ("env.format", c.env.format, FORMATS),
        ("search.backend", c.search.backend, RETRIEVERS), ("train.lr_schedule", c.train.lr_schedule, LR_SCHEDULES),
        ("rollout.engine", c.rollout.engine, ENGINES), ("model.arch", c.model.arch, ARCHS),
        ("model.chat_template", c.model.chat_template, CHAT_TEMPLATES),
        ("model.tokenizer", c.model.tokenizer, PRE_TOKENIZERS),
    ):
        registry.check(value, key)
    choices = [  # (key, value, fixed choices): a typo fails here, not after a full rollout
        ("algo.loss_agg", c.algo.loss_agg, AGG_MODES),
        ("sft.demo_style", c.sft.demo_style, DEMO_STYLES),
        ("search.dense_index", c.search.dense_index, DENSE_INDEXES), ("search.rrf", c.search.rrf, RRF_MODES),
        ("train.precision", c.train.precision, PRECISIONS),
    ]
    for key, value, known in choices:
        if value not in known:
            raise ValueError(f"{key}={value!r}; choose one of {sorted(known)}")
    if c.env.agent or c.env.kind == "openai_agent":  # the shape now; the import when the env is built
        from agent_r1.agents.agent_ref import check_agent_ref

        check_agent_ref(c.env.agent)
    check_kind_keys(c.env)  # keys the env kind never reads are refused, not ignored
    if ADV_ESTIMATORS.traits(c.algo.adv_estimator).group and c.rollout.n_samples < 2:
        raise ValueError(f"algo.adv_estimator={c.algo.adv_estimator!r} compares samples of one prompt: "
                         f"set rollout.n_samples >= 2 (got {c.rollout.n_samples})")
    if c.algo.dynamic_sampling.enabled and not ADV_ESTIMATORS.traits(c.algo.adv_estimator).group:
        groups = [n for n in ADV_ESTIMATORS.names() if ADV_ESTIMATORS.traits(n).group]
        raise ValueError(f"algo.dynamic_sampling.enabled=true drops groups whose rewards are all equal (nothing to "
                         f"learn for a group estimator), but algo.adv_estimator={c.algo.adv_estimator!r} compares "
                         f"no groups: use one of {groups}, or set algo.dynamic_sampling.enabled: false")
    if c.reward.overlong_buffer > c.rollout.max_total_tokens:
        raise ValueError(f"reward.overlong_buffer={c.reward.overlong_buffer} is longer than rollout.max_total_tokens="
                         f"{c.rollout.max_total_tokens}: the penalty ramps over the last overlong_buffer tokens "
                         "of that budget; lower it (0 = off)")
    if c.train.max_staleness > 0 and not c.ray.enabled:
        raise ValueError(f"train.max_staleness={c.train.max_staleness} overlaps rollout with the update on Ray's "
                         "rollout workers: set ray.enabled=true, or train.max_staleness=0 (in-process training "
                         "is synchronous)")
    if c.train.fsdp and c.train.device == "cpu":
        raise ValueError("train.fsdp=true shards the policy over CUDA devices, but train.device=cpu; set "
                         "train.fsdp: false (CPU learners are replicas over gloo) or train.device: cuda")
    if c.train.micro_batch_size > c.train.minibatch_size:
        raise ValueError(f"train.micro_batch_size={c.train.micro_batch_size} is larger than train.minibatch_size="
                         f"{c.train.minibatch_size}: a micro-batch splits a mini-batch; lower it (0 = the whole "
                         "mini-batch at once)")
    for key in ("train_file", "eval_file"):  # file names inside data.dir: they may not leave it
        name = getattr(c.data, key)
        if not name or Path(name).is_absolute() or ".." in Path(name).parts:
            raise ValueError(f"data.{key}={name!r} must be a file name inside data.dir ({c.data.dir!r}), "
                             "not an absolute path or one with '..'; point data.dir at the folder instead")
    check_folder_name(c.train.experiment, "train.experiment")
    if c.train.run_name:
        check_folder_name(c.train.run_name, "train.run_name")
    for key in ("url", "credentials_url"):
        url = getattr(c.search, key) or ""
        if urlsplit(url).username or urlsplit(url).password:
            raise ValueError(f"search.{key} holds credentials (user:password@); remove them and set "
                             "AGENT_R1_ES_API_KEY or AGENT_R1_ES_USER/AGENT_R1_ES_PASSWORD, so they are never "
                             "logged with the config")
