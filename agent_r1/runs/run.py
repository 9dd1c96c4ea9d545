"""A run's recipe: the one module that builds a run's parts, once each and in one order, then trains,
evaluates and closes it (as torchtune's recipes do: `setup()` calls small builders in a fixed order).

    run = Run.open(cfg)            # settled: resume checks, starting model, folder, config.json, frozen config
    result = run.train()           # setup(), the RL iterations, the result; the run is closed after
    results = run.evaluate()       # the held-out evaluation of its checkpoint

`Run.open(cfg)` settles everything a run's identity depends on before any part is built: `--resume`
with nothing to resume and a pinned folder of the user's own files fail at once (folders.py);
`train.init_from: sft` becomes the matching warm start (trained or reused, warm_start.py); the folder
is claimed (a new one under train.runs_dir unless `train.out_dir` pins it) and, on a fresh start, a
previous run in it moved aside (folders.py); config.json is written and the config frozen
(`agent_r1.schema.freeze`). `Run.load(folder)` reopens a run from its config.json.

`setup()` then builds, in this order:
  1. folder   the folder's run lock (held until `close`); a fresh start's folder holds this run only
  2. data     the data folder (a generated task is written on first use)
  3. index    the retrieval index over its corpus
  4. card     run.json says the run is running, with its lineage: data -> index -> warm start
  5. logger   metrics.jsonl, and the MLflow run when one is handed in (`mlflow_run`)
  6. env      the retriever and the env factory
  7. policy   the policy to train (fresh, warm start, or the checkpoint resumed), its KL reference, samples
  8. trainer  RLTrainer in this process; or RayTrainer, whose actors build 6 and 7 from `spec()`
Each part is built by a function of agent_r1/runs/assembly.py, at most once per Run (cached
properties), so a `Run(cfg)` without a folder gives the parts alone (`agent-r1 rollout`, `agent-r1
prepare-data`, benchmarks). The CLI, the Prefect flow (flows/train_agent.py, whose tasks are handed the Run)
and the Ray actors (agent_r1/training/ray_actors.py, handed `spec()`) all build a run here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_r1.config import ExperimentConfig, load_config
from agent_r1.runs.folders import (
    check_pinned_run_folder,
    check_resume,
    check_resume_config,
    check_run_folder_free,
    fail_card,
    finish_card,
    hold_run_folder,
    open_run,
    read_record,
    read_run_config,
    resume_checkpoint,
    set_aside_previous_run,
    start_card,
    update_record,
    write_run_config,
)
from agent_r1.schema import freeze, is_frozen
from agent_r1.training import checkpoint as ckpt

if TYPE_CHECKING:
    from agent_r1.tracking.metrics import MetricsSink
    from agent_r1.training.ray_trainer import RayTrainer
    from agent_r1.training.trainer import RLTrainer

WARM_START_KEYWORD = "sft"  # train.init_from: sft = the warm start matching the run's config


@dataclass
class RunParts:
    """What a trainer is built from: the policy to train, its KL reference, the data and index."""

    model: Any
    tokenizer: Any
    reference: Any | None
    latest: Path | None  # the checkpoint to resume from, if any
    index_dir: Path
    train_samples: list[dict[str, Any]]
    eval_samples: list[dict[str, Any]]


class Run:
    """One run's config (frozen) and its parts, each built at most once."""

    def __init__(self, cfg: ExperimentConfig, resume: bool = False, warm_start: Any = None,
                 resume_from: Path | None = None):
        self.cfg: ExperimentConfig = cfg if is_frozen(cfg) else freeze(copy.deepcopy(cfg))
        self.resume = resume
        self.warm_start = warm_start  # the WarmStart `train.init_from: sft` resolved to, if it did here
        self._resume_from = resume_from  # found by Run.open; else on first use (`resume_from`)
        self._retriever: Any = None
        self._held: ExitStack | None = None  # the folder's run lock, from setup() to close()
        self.logger: MetricsSink | None = None  # setup() step 5
        self.trainer: RLTrainer | RayTrainer | None = None  # setup() step 8
        self.tracking_report: dict[str, Any] | None = None  # how the last `mlflow_run` ended: sent, buffered

    # ------------------------------------------------------------------------------------ opening
    @classmethod
    def open(cls, cfg: ExperimentConfig, resume: bool = False, name: str | None = None,
             resolve_start: bool = True, log: Any = print, allow_config_change: bool = False) -> Run:
        """Settles the run: checks, starting model, folder, config.json; then freezes the config.
        `cfg` itself is left as it was. `resolve_start=False` leaves `train.init_from: sft` for a
        later `with_start` (the flow trains the warm start in a stage of its own). A resume whose config
        changes what the run trains is refused unless `allow_config_change` (folders.py)."""

        cfg = copy.deepcopy(cfg)
        check_resume(cfg, resume)
        if cfg.train.out_dir:
            check_pinned_run_folder(cfg)  # before a warm start is trained, not after
            # a live run's folder is neither resumed twice nor moved aside under it (folders.py)
            check_run_folder_free(cfg.train.out_dir)
        resume_from = None
        if resume:
            check_resume_config(cfg, cfg.train.out_dir, allow_config_change)  # the run it continues, not another
            # before data, index, a warm start or Ray are built: nothing to resume fails at once, naming
            # the folder (on the Ray path the same error would otherwise arrive wrapped in an actor error)
            resume_from = resume_checkpoint(Path(cfg.train.out_dir))
        warm = None
        if resolve_start and cfg.train.init_from == WARM_START_KEYWORD:  # the matching warm start
            from agent_r1.runs.warm_start import ensure_warm_start

            warm = ensure_warm_start(cfg, log=log)
            cfg.train.init_from = str(warm.model_dir)
        open_run(cfg, name)
        run = cls(cfg, resume, warm, resume_from)
        if not resume:
            run._claim_folder()
        return run

    @classmethod
    def load(cls, folder: str | Path, resume: bool = False) -> Run:
        """The run a folder holds, from its config.json (what `Run.open` wrote there)."""

        saved = Path(folder) / "config.json"
        if not saved.is_file():
            raise FileNotFoundError(f"{folder} holds no config.json: not a run folder opened by Run.open "
                                    "(`agent-r1 runs` lists the runs)")
        return cls(load_config(tree=read_run_config(folder)), resume=resume)

    def with_start(self, model_dir: str | Path, sft_dir: str | Path | None = None) -> Run:
        """This run starting from `model_dir` (a warm start trained after it opened): config.json is
        rewritten and a new Run returned, with the data and index this one found; this one keeps its config."""
        tree = self.cfg.to_dict()
        tree["train"]["init_from"] = str(model_dir)
        if sft_dir is not None:
            tree["sft"]["out_dir"] = str(sft_dir)
        run = self._sibling(load_config(tree=tree), self.resume)
        run.write_config()
        return run

    def resumed(self) -> Run:
        """This run continuing from its folder's latest checkpoint (a retried flow task that had saved one)."""
        return self._sibling(self.cfg, resume=True)

    def _sibling(self, cfg: ExperimentConfig, resume: bool) -> Run:
        """A Run of the same data and index as this one (found, not checked again)."""
        run = Run(cfg, resume)
        for built in ("data_dir", "index_dir"):  # a starting model or a resume changes neither
            if built in self.__dict__:
                run.__dict__[built] = self.__dict__[built]
        return run

    def write_config(self) -> Path:
        """config.json without the config's secrets; they go to a private file beside it (folders.py)."""

        return write_run_config(self.folder, self.cfg.to_dict())

    def _claim_folder(self) -> None:
        """A fresh start: the folder holds this run only (a previous run's files, or what a failed
        attempt of this one left, moved aside: folders.py), and its config.json."""

        set_aside_previous_run(self.folder)
        self.write_config()

    @property
    def folder(self) -> Path:
        if not self.cfg.train.out_dir:
            raise ValueError("this Run has no folder: open it with Run.open(cfg) (or pin train.out_dir)")
        return Path(self.cfg.train.out_dir)

    @property
    def resume_from(self) -> Path | None:
        """The checkpoint this run continues from (None on a fresh start), found once."""
        if self.resume and self._resume_from is None:

            self._resume_from = resume_checkpoint(self.folder)
        return self._resume_from

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

    def parts(self) -> RunParts:
        """The trainer's parts: the policy (fresh, `train.init_from`, or the checkpoint resumed), its KL
        reference, the data, index and samples. A fresh start saves its starting policy as the folder's
        init_model/ (the KL reference, and what a resume starts from). Policy and reference are loaded
        in `model.dtype`, as a fresh start builds them; a resumed full fine-tune then gets back the
        float32 master weights its checkpoint saved."""
        from agent_r1.models.build import load_model, save_model
        from agent_r1.models.lora import apply_lora

        cfg, latest = self.cfg, self.resume_from
        init_dir = self.folder / "init_model"
        lora = cfg.model.lora.enabled  # the reference is then the policy with its adapters off: no copy
        if latest is not None:  # a LoRA checkpoint is an adapter folder: load_model puts it over its base
            model, tokenizer = load_model(latest, cfg.model.dtype)
            if not lora:  # the float32 masters a bf16 full fine-tune saved, not their bf16 rounding
                ckpt.restore_master_weights(model, latest)
            reference = load_model(init_dir, cfg.model.dtype)[0] if cfg.algo.kl_coef > 0 and not lora else None
        else:
            model, tokenizer = self.policy(cfg.train.init_from)
            save_model(model, tokenizer, init_dir)
            model = apply_lora(model, cfg.model.lora, base=init_dir)  # adapters record init_dir as their base
            reference = None
        return RunParts(model, tokenizer, reference, latest, self.index_dir, self.train_samples, self.eval_samples)

    def lineage(self) -> dict[str, str]:
        """data -> index -> warm start hashes of the run (full SHA-256s, lineage.py)."""
        from agent_r1.runs.lineage import data_hash, digest_cache, index_hash
        from agent_r1.runs.warm_start import warm_start_of

        cfg = self.cfg
        cache = digest_cache(cfg)
        lineage = {"data": data_hash(self.data_dir, (cfg.data.train_file, cfg.data.eval_file), cache),
                   "index": index_hash(self.index_dir, cfg.search)}
        cache.save()
        start = cfg.train.init_from
        lineage["warm_start"] = (warm_start_of(start) if start else None) or (f"model:{start}" if start else "fresh")
        return lineage

    # ------------------------------------------------------------------------------------ setup
    def setup(self, sink: Any = None, tracker: Any = None) -> None:
        """Builds the run's parts for training, in the order the module's docstring gives; holds the
        folder's run lock until `close`. A folder another trainer holds is refused first, its card
        untouched (folders.py); any later failure marks the card failed and closes the run.
        `sink`: the metrics logger to use instead of the folder's metrics.jsonl; `tracker`: the
        run's MLflow run (`mlflow_run`), logged to as well as metrics.jsonl."""
        from agent_r1.runs.assembly import set_threads

        held = ExitStack()
        held.enter_context(hold_run_folder(self.folder))  # 1. folder
        self._held = held
        try:
            if not self.resume:
                self._claim_folder()
            self.index_dir  # noqa: B018  2. data, 3. index (the index is built over the data folder)
            start_card(self.cfg, self.lineage(), resumed_from=self.resume_from)  # 4. card
            self.logger = sink if sink is not None else metrics_logger(self.folder, tracker, self.resume_from)  # 5.
            if self.cfg.ray.enabled:  # 6.-8.: the actors build env and policy from the spec
                from agent_r1.training.ray_trainer import RayTrainer

                self.trainer = RayTrainer(self.spec(), sink=self.logger)
                resumed = self.trainer.resumed_from
            else:
                from agent_r1.training.trainer import RLTrainer

                set_threads(self.cfg.train.threads)
                make_env = self.env_factory  # 6.
                parts = self.parts()  # 7.
                self.trainer = RLTrainer(self.cfg, parts.model, parts.tokenizer, make_env, parts.train_samples,
                                         parts.eval_samples, sink=self.logger, reference=parts.reference)  # 8.
                resumed = parts.latest
                if resumed is not None:
                    self.trainer.load(resumed)
            if resumed:
                print(f"resumed from {resumed} at iteration {self.trainer.iteration}")
        except BaseException as err:
            fail_card(self.folder, err)
            self.close()
            raise

    # ------------------------------------------------------------------------------------ work
    def train(self, sink: Any = None, tracker: Any = None,
              on_iteration: Callable[[int, dict[str, float]], None] | None = None) -> dict[str, Any]:
        """`setup()`, then the RL iterations (in-process, or on Ray actors with `ray.enabled`); returns
        the result (final metrics, folder, checkpoint and its hash). The card follows each iteration;
        with a `tracker`, each checkpoint is uploaded once saved and the result's lineage and
        checkpoint hash become the MLflow run's tags. The run is closed after, whatever happened."""

        self.setup(sink=sink, tracker=tracker)
        out = self.folder

        def progress(it: int, metrics: dict[str, float]) -> None:
            update_record(out, iterations=it)
            if on_iteration is not None:
                on_iteration(it, metrics)
            if tracker is not None:
                self.logger.log_checkpoints()  # those saved so far (the trainer saves after this callback)

        try:
            final = self.trainer.fit(on_iteration=progress)
            iterations = self.trainer.iteration
            self._stop_trainer()  # a vLLM engine's core process or the Ray actors end with the training
            result = self._finish(iterations, final)
            if tracker is not None:
                self.logger.log_checkpoints()
                card = read_record(out)
                tracker.set_tags({"checkpoint": result.get("checkpoint") or "",
                                  "checkpoint.sha256": result.get("checkpoint_sha256") or "",
                                  **{f"lineage.{k}": v for k, v in card.get("lineage", {}).items()}})
            return result
        except BaseException as err:
            fail_card(out, err)
            raise
        finally:
            self.close()

    def _finish(self, iterations: int, final: dict[str, float]) -> dict[str, Any]:
        """final_metrics.json, and the card: finished, final held-out EM, the last checkpoint and its hash."""

        out = self.folder
        if final:
            (out / "final_metrics.json").write_text(json.dumps(final, indent=1))
        checkpoint = ckpt.latest_checkpoint(out / "checkpoints")
        card = finish_card(out, iterations, final, checkpoint)
        return {"iterations": iterations, "final": final, "out_dir": str(out),
                "checkpoint": str(checkpoint) if checkpoint else None, "checkpoint_sha256": card.get("checkpoint_sha256")}

    def evaluate(self, checkpoint: str | Path | None = None, log: Callable[[str], None] = print,
                 reuse: bool = True) -> dict[str, dict[str, dict[str, float]]]:
        """Greedy held-out evaluation of a checkpoint (default: the latest, "rl") and of the run's
        starting point ("start": the folder's init_model/) on `train.eval_size` questions of the eval
        file, through evaluation/harness.py; numbers the trainer measured on exactly those questions at
        step 0 and at the end are reused (`reuse`). Writes `<folder>/eval_metrics.json`:
        {dataset: {model: {em, f1, substring_em, ...}}}. The run is closed after."""
        from agent_r1.evaluation.harness import evaluate_model
        from agent_r1.runs.assembly import set_threads

        cfg, out = self.cfg, self.folder
        set_threads(cfg.train.threads)
        checkpoint = checkpoint or ckpt.latest_checkpoint(out / "checkpoints")
        if checkpoint is None:
            raise FileNotFoundError(f"no checkpoint in {out / 'checkpoints'}; train first")
        models = {"rl": str(checkpoint)}
        if (out / "init_model").exists():
            models["start"] = str(out / "init_model")
        name = Path(cfg.data.eval_file).stem
        samples = self.eval_samples
        results: dict[str, dict[str, dict[str, float]]] = {name: {}}
        known = self._trainer_evals(Path(checkpoint), len(samples)) if reuse else {}
        for label, m in known.items():
            results[name][label] = {**m, "n": float(len(samples)), "source": "trainer"}
            log(f"{label} on {name} ({len(samples)} questions, measured by the trainer): EM {m['em']:.1f} "
                f"F1 {m['f1']:.1f} search-first {m['search_first_rate']:.0f}%")
        try:
            for label, model_dir in models.items():
                if label in known:
                    continue
                report = evaluate_model(model_dir, cfg, {name: samples}, ["agent"], retriever=self.retriever,
                                        device=cfg.train.device)
                m = report["results"]["agent"][name]
                results[name][label] = {**m, "n": float(len(samples))}
                log(f"{label} on {name} ({len(samples)} questions): EM {m['em']:.1f} F1 {m['f1']:.1f} "
                    f"search-first {m['search_first_rate']:.0f}%")
        finally:
            self.close()
        (out / "eval_metrics.json").write_text(json.dumps(results, indent=1))
        return results

    def _trainer_evals(self, checkpoint: Path, n: int) -> dict[str, dict[str, float]]:
        """The trainer already rolled out the start (step 0) and final policy greedily on these very
        questions (same file, size, seed and rollout config): reuse those numbers rather than
        recomputing them. Empty when they do not cover exactly this evaluation."""
        from agent_r1.tracking.metrics import read_metrics

        rows = {r["step"]: r for r in read_metrics(self.folder / "metrics.jsonl") if "eval/em" in r}
        final_step = int(checkpoint.name.split("_")[-1]) if checkpoint.name.startswith("iter_") else -1
        found = {}
        for label, step in (("start", 0), ("rl", final_step)):
            row = rows.get(step)
            if row and row.get("eval/n") == n:
                found[label] = {k[len("eval/"):]: v for k, v in row.items() if k.startswith("eval/")}
        return found if len(found) == 2 else {}

    # ------------------------------------------------------------------------------------ MLflow
    @contextmanager
    def mlflow_run(self, pipeline: str, tags: dict[str, Any] | None = None, root: str | Path | None = None,
                   card: dict[str, Any] | None = None) -> Iterator[Any]:
        """The run's MLflow run for the `with` block (the CLI's `agent-r1 train`, the flow's parent run):
        named after the folder, in `train.experiment`, tagged with the checkout (`root`), the machine,
        `pipeline`, the folder and `tags`, the config as params (secrets hidden). The card names it (with
        `card`'s fields); a resumed run is a new MLflow run tagged with the one it continues. Ended
        FINISHED, or FAILED when the block raises; `tracking_report` then says what was sent or buffered."""
        from agent_r1.tracking import RunTracker, git_tags, machine_tags

        folder, tree = self.folder, self.cfg.to_dict()
        every = {**git_tags(root), **machine_tags(tree), "pipeline": pipeline,
                 "run.name": folder.name, "run.dir": str(folder), **(tags or {})}
        before = read_record(folder).get("mlflow_run_id")
        if self.resume and before:
            every["resumed_from_mlflow_run"] = before
        tracker = RunTracker(folder.name, experiment=self.cfg.train.experiment, tags=every)
        tracker.log_config(tree)
        update_record(folder, mlflow_run_id=tracker.run_id, **(card or {}))
        status = "FAILED"
        try:
            yield tracker
            status = "FINISHED"
        finally:
            self.tracking_report = tracker.close(status)
            # the id is None at the start when another process held the MLflow buffer's flush lock (the
            # run was created from the buffer since): the card names the run once it is known
            if tracker.run_id:
                update_record(folder, mlflow_run_id=tracker.run_id)

    # ------------------------------------------------------------------------------------ closing
    def _stop_trainer(self) -> None:
        trainer, self.trainer = self.trainer, None
        if trainer is not None:
            trainer.close()

    def close(self) -> None:
        """Ends what the run holds open: its trainer's engine or actors, MCP servers' connections
        (env.mcp_servers), the retriever, the folder's run lock. The run can be set up again after."""
        from agent_r1.closing import close_all

        self._stop_trainer()
        close_all(self.__dict__.pop("env_factory", None))
        if self._retriever is not None:
            self._retriever.close()
            self._retriever = None
        held, self._held = self._held, None
        if held is not None:
            held.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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
    def parts(self) -> RunParts:
        return self.attach().parts()

    def open_index(self, index_dir: str | Path) -> Any:
        from agent_r1.runs.assembly import open_run_index

        return open_run_index(self.cfg, index_dir)

    def env_factory(self, retriever: Any) -> Any:
        from agent_r1.envs.factory import make_env_factory

        return make_env_factory(self.cfg, retriever)


def metrics_logger(folder: Path, tracker: Any = None, resume_from: Path | None = None) -> MetricsSink:
    """A run's metrics logger: the folder's metrics.jsonl (what `dvc plots` reads), and with the run's
    MLflow `tracker` an MlflowSink over it that also uploads checkpoints and logs trajectory tables.
    A resume drops the steps logged after its checkpoint, and uploads no checkpoint older than it: the
    earlier run uploaded those (it may have been killed before uploading the one resumed from, which
    goes to this run again, as do later ones)."""
    from agent_r1.tracking.metrics import JsonlMetrics

    jsonl = JsonlMetrics(folder / "metrics.jsonl",
                         resume_from_step=ckpt.checkpoint_iteration(resume_from) + 1 if resume_from else None)
    if tracker is None:
        return jsonl
    from agent_r1.tracking import MlflowSink

    sink = MlflowSink(tracker, also=[jsonl], checkpoints_dir=folder / "checkpoints")
    if resume_from is not None:
        sink.logged_checkpoints.update(p.name for p in (folder / "checkpoints").glob("iter_*")
                                       if p.name < resume_from.name)
    return sink


def run_train(cfg: ExperimentConfig, resume: bool = False, sink: Any = None,
              on_iteration: Any = None, allow_config_change: bool = False) -> dict[str, Any]:
    """`Run.open(cfg, resume).train(...)` in one call, for tests and benchmarks. Trains from
    `train.init_from` (a folder, `sft` = the matching warm start, or empty = a fresh model) into the
    run's own folder (a new one unless `train.out_dir` pins it); with `resume`, continues from the
    latest complete checkpoint in `train.out_dir`. Returns the result (final metrics, folder,
    checkpoint and its hash)."""
    run = Run.open(cfg, resume, allow_config_change=allow_config_change)
    print(f"run folder: {run.folder}", flush=True)
    return run.train(sink=sink, on_iteration=on_iteration)
