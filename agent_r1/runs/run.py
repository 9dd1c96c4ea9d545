"""A run, built once and in one order: the only owner of run assembly (as torchtune's `setup()`).

    run = Run.open(cfg)            # folder, starting model, config.json written, config frozen
    result = run.train()           # data, index, lineage, policy, trainer: each built once, here
    results = run.evaluate()       # the held-out evaluation of its checkpoint

`Run.open(cfg)` settles everything a run's identity depends on before any part is built: `--resume`
with nothing to resume and a pinned folder of the user's own files fail at once; `train.init_from:
sft` becomes the matching warm start (trained or reused); the folder is claimed (a new one under
train.runs_dir unless `train.out_dir` pins it) and a previous run in it moved aside; config.json is
written and the config frozen (`agent_r1.schema.freeze`). Every part is then a cached property of the
run: data folder, index, retriever, samples, env factory, policy. `Run.load(folder)` reopens a run
from its config.json: the Prefect tasks pass the folder, not params and overrides. `run.spec()` is
the picklable form the Ray actors rebuild the same run from (agent_r1/training/ray_actors.py).
A `Run(cfg)` without a folder gives the parts alone (`agent-r1 rollout`, `agent-r1 eval`, benchmarks).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig, load_config
from agent_r1.schema import freeze, is_frozen


@dataclass(frozen=True)
class RunSpec:
    """What another process needs to build the same run's parts: the frozen config tree and whether
    it resumes. Picklable (plain data); `training/` calls its methods without importing this layer."""

    config: dict[str, Any]
    resume: bool = False
    _run: list[Any] = field(default_factory=list, compare=False, repr=False)  # the Run, once attached here

    def attach(self) -> Run:
        if not self._run:
            self._run.append(Run(load_config(tree=self.config), resume=self.resume))
        return self._run[0]

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "resume": self.resume, "_run": []}  # never a process's open retriever

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)

    @property
    def cfg(self) -> ExperimentConfig:
        return self.attach().cfg

    # what the Ray learner and rollout workers build from (agent_r1/training/ray_actors.py)
    def parts(self) -> Any:
        return self.attach().parts()

    def open_index(self, index_dir: str | Path) -> Any:
        from agent_r1.runs.assembly import open_run_index

        return open_run_index(self.cfg, index_dir)

    def env_factory(self, retriever: Any) -> Any:
        from agent_r1.envs.factory import make_env_factory

        return make_env_factory(self.cfg, retriever)


class Run:
    """One run's config (frozen) and its parts, each built at most once."""

    def __init__(self, cfg: ExperimentConfig, resume: bool = False, warm_start: Any = None):
        self.cfg: ExperimentConfig = cfg if is_frozen(cfg) else freeze(copy.deepcopy(cfg))
        self.resume = resume
        self.warm_start = warm_start  # the WarmStart `train.init_from: sft` resolved to, if it did here
        self._retriever: Any = None

    # ------------------------------------------------------------------------------------ opening
    @classmethod
    def open(cls, cfg: ExperimentConfig, resume: bool = False, name: str | None = None,
             resolve_start: bool = True, log: Any = print, allow_config_change: bool = False) -> Run:
        """Settles the run: checks, starting model, folder, config.json; then freezes the config.
        `cfg` itself is left as it was. `resolve_start=False` leaves `train.init_from: sft` for a
        later `with_start` (the flow trains the warm start in a stage of its own). A resume whose config
        changes what the run trains is refused unless `allow_config_change` (resume_check.py)."""
        from agent_r1.runs.lifecycle import check_pinned_run_folder, open_run, resolve_init
        from agent_r1.runs.fit import check_resume, resume_checkpoint, set_aside_previous_run

        from agent_r1.runs.run_lock import check_run_folder_free

        cfg = copy.deepcopy(cfg)
        check_resume(cfg, resume)
        if cfg.train.out_dir:
            check_pinned_run_folder(cfg)  # before a warm start is trained, not after
            # a live run's folder is neither resumed twice nor moved aside under it (run_lock.py)
            check_run_folder_free(cfg.train.out_dir)
        if resume:
            from agent_r1.runs.resume_check import check_resume_config

            check_resume_config(cfg, cfg.train.out_dir, allow_config_change)  # the run it continues, not another
            # before data, index, a warm start or Ray are built: nothing to resume fails at once, naming
            # the folder (on the Ray path the same error would otherwise arrive wrapped in an actor error)
            resume_checkpoint(Path(cfg.train.out_dir))
        warm = resolve_init(cfg, log=log) if resolve_start else None
        folder = open_run(cfg, name)
        run = cls(cfg, resume, warm)
        if not resume:
            set_aside_previous_run(folder)  # a fresh start: the folder holds this run only
            run.write_config()
        return run

    @classmethod
    def load(cls, folder: str | Path, resume: bool = False) -> Run:
        """The run a folder holds, from its config.json (what `Run.open` wrote there)."""
        from agent_r1.runs.config_file import read_run_config

        saved = Path(folder) / "config.json"
        if not saved.is_file():
            raise FileNotFoundError(f"{folder} holds no config.json: not a run folder opened by Run.open "
                                    "(`agent-r1 runs` lists the runs)")
        return cls(load_config(tree=read_run_config(folder)), resume=resume)

    def with_start(self, model_dir: str | Path, sft_dir: str | Path | None = None) -> Run:
        """This run starting from `model_dir` (a warm start trained after it opened): config.json is
        rewritten and a new Run returned; this one keeps its config."""
        tree = self.cfg.to_dict()
        tree["train"]["init_from"] = str(model_dir)
        if sft_dir is not None:
            tree["sft"]["out_dir"] = str(sft_dir)
        run = Run(load_config(tree=tree), self.resume)
        run.write_config()
        return run

    def write_config(self) -> Path:
        """config.json without the config's secrets; they go to a private file beside it (config_file.py)."""
        from agent_r1.runs.config_file import write_run_config

        return write_run_config(self.folder, self.cfg.to_dict())

    @property
    def folder(self) -> Path:
        if not self.cfg.train.out_dir:
            raise ValueError("this Run has no folder: open it with Run.open(cfg) (or pin train.out_dir)")
        return Path(self.cfg.train.out_dir)

    def spec(self) -> RunSpec:
        return RunSpec(self.cfg.to_dict(), self.resume)

    # ------------------------------------------------------------------------------------ parts
    @cached_property
    def data_dir(self) -> Path:
        from agent_r1.runs.assembly import ensure_data

        return ensure_data(self.cfg)

    @cached_property
    def index_dir(self) -> Path:
        from agent_r1.runs.assembly import ensure_index

        return ensure_index(self.cfg, self.data_dir)

    @property
    def retriever(self) -> Any:
        """The run's retriever, opened once (closed by `close`)."""
        if self._retriever is None:
            from agent_r1.runs.assembly import open_run_index

            self._retriever = open_run_index(self.cfg, self.index_dir)
        return self._retriever

    @cached_property
    def env_factory(self) -> Any:
        from agent_r1.envs.factory import make_env_factory

        return make_env_factory(self.cfg, self.retriever)

    @cached_property
    def train_samples(self) -> list[dict[str, Any]]:
        return self.samples("train")

    @cached_property
    def eval_samples(self) -> list[dict[str, Any]]:
        return self.samples("eval", self.cfg.train.eval_size)

    def samples(self, split: str = "eval", limit: int | None = None) -> list[dict[str, Any]]:
        """`limit` question rows of the train or eval file (all, when None); another split name
        reads `<split>.jsonl` in the data folder (a prepared source's `dev`, say)."""
        from agent_r1.runs.assembly import load_samples

        name = {"train": self.cfg.data.train_file, "eval": self.cfg.data.eval_file}.get(split, f"{split}.jsonl")
        return load_samples(self.data_dir / name, limit, cfg=self.cfg)

    def policy(self, source: str | Path = "") -> tuple[Any, Any]:
        """A new (model, tokenizer): `source` > model.name_or_path > a fresh local model. Not cached:
        a model is trained in place, so each caller gets its own. Only a fresh model reads the data
        (its tokenizer is trained on the corpus): a model folder is loaded without building any."""
        from agent_r1.runs.assembly import build_policy

        fresh = not (source or self.cfg.model.name_or_path)
        return build_policy(self.cfg, self.data_dir if fresh else None, str(source))

    def parts(self) -> Any:
        """The trainer's parts: policy (fresh, warm start or the checkpoint resumed), reference, samples."""
        from agent_r1.runs.fit import prepare_run

        return prepare_run(self)

    def lineage(self) -> dict[str, str]:
        from agent_r1.runs.lifecycle import run_lineage

        return run_lineage(self.cfg, self.data_dir, self.index_dir)

    # ------------------------------------------------------------------------------------ work
    def train(self, sink: Any = None, on_iteration: Any = None) -> dict[str, Any]:
        """The RL iterations (in-process, or on Ray actors with `ray.enabled`); returns the result."""
        from agent_r1.runs.fit import train_run

        return train_run(self, sink=sink, on_iteration=on_iteration)

    def evaluate(self, checkpoint: str | Path | None = None, log: Any = print, reuse: bool = True) -> dict[str, Any]:
        """Greedy held-out evaluation of a checkpoint (default: the latest) and of the starting model."""
        from agent_r1.runs.evaluate import evaluate_run

        return evaluate_run(self, checkpoint, log=log, reuse=reuse)

    def close(self) -> None:
        from agent_r1.closing import close_all

        close_all(self.__dict__.pop("env_factory", None))  # MCP servers' connections (env.mcp_servers)
        if self._retriever is not None:
            self._retriever.close()
            self._retriever = None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
