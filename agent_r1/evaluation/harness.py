"""The benchmark harness: a model, question sets, a retriever and a mode -> per-dataset metrics.

    report = evaluate_model("runs/sft/model", cfg, {"hotpotqa": samples}, modes=["agent", "rag"])
    print(format_table(report))

Question files are read in their own format (our questions.jsonl, official HotpotQA / 2Wiki /
MuSiQue rows, or questions-only `{question, answer}` rows), detected from the first row and the
file name. Metrics per dataset come from `trajectory_stats`: EM, F1 and substring EM are kept
separate, never blended.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agent_r1.closing import close_all
from agent_r1.evaluation.agent_eval import trajectory_stats
from agent_r1.evaluation.modes import EVAL_MODES, EvalContext, get_mode, needs_retriever
from agent_r1.trajectory import Trajectory

#: the columns of the printed table, in order (key, header, format)
TABLE_COLUMNS = (
    ("n", "n", "{:.0f}"),
    ("em", "EM", "{:.1f}"),
    ("f1", "F1", "{:.1f}"),
    ("substring_em", "SubEM", "{:.1f}"),
    ("mean_turns", "turns", "{:.2f}"),
    ("tool_calls_per_question", "calls/q", "{:.2f}"),
    ("valid_call_rate", "valid%", "{:.1f}"),
    ("support_recall", "sup.rec%", "{:.1f}"),
    ("budget_hits", "budget", "{:.0f}"),
    ("answer_format_failures", "fmt.fail", "{:.0f}"),
)


# ------------------------------------------------------------------------------ question sets

def _first_row(path: Path) -> dict[str, Any]:
    from agent_r1.data.io import iter_records

    for rec in iter_records(path, skip_bad=True):
        if isinstance(rec.value, dict):
            return rec.value
    raise ValueError(f"{path}: no JSON object rows")


def _guess_dataset(path: Path) -> str | None:
    from agent_r1.data.loaders import LOADERS

    stem = path.name.lower()
    return next((name for name in LOADERS if stem.startswith(name)), None)


def load_question_set(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of any supported question file as sample dicts (QASample.to_dict())."""
    from agent_r1.data.loaders import LOADERS, load_bamboogle
    from agent_r1.envs.samples import load_questions as load_questions_jsonl  # rows' env checked

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"question file {str(path)!r} not found")
    row = _first_row(path)
    if "id" in row and "answers" in row:
        loader = load_questions_jsonl  # our own schema
    elif "context" in row and "supporting_facts" in row:
        loader = LOADERS["2wiki" if _guess_dataset(path) == "2wiki" else "hotpotqa"]
    elif "paragraphs" in row:
        loader = LOADERS["musique"]
    else:  # questions-only rows: the named dataset's loader, else the plain {question, answer} one
        loader = LOADERS.get(_guess_dataset(path) or "", load_bamboogle)
    rows = [s.to_dict() for s in loader(path)]
    return rows[:limit] if limit else rows


def parse_question_specs(spec: str) -> dict[str, Path]:
    """`FILE[,FILE...]`, each optionally `NAME=FILE` -> {dataset name: path}. The default name is
    the known dataset the file name starts with (hotpotqa, 2wiki, ...), else the file stem."""
    out: dict[str, Path] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, file = item.rpartition("=") if "=" in item else ("", "", item)
        path = Path(file)
        name = name or _guess_dataset(path) or path.name.split(".")[0]
        if name in out:
            raise ValueError(f"two question files are both named {name!r}; name them: NAME=FILE")
        out[name] = path
    if not out:
        raise ValueError("no question files given")
    return out


# ------------------------------------------------------------------------------ evaluation

def evaluate_datasets(engine: Any, codec: Any, cfg: Any, datasets: dict[str, list[dict[str, Any]]],
                      modes: list[str], retriever: Any = None, greedy: bool = True, batch_size: int = 64,
                      keep_trajectories: bool = False) -> dict[str, Any]:
    """{"results": {mode: {dataset: stats}}, "seconds": {mode: {dataset: s}}} (+ trajectories)."""
    from agent_r1.envs.factory import make_env_factory

    for mode in modes:
        if needs_retriever(mode, cfg) and retriever is None:
            raise ValueError(f"mode {mode!r} needs a retriever: pass --index DIR")
    # the run's env (with its MCP servers' connections) for the modes that roll it out, closed at the end
    make_env = make_env_factory(cfg, retriever) if any(EVAL_MODES.traits(m).tools for m in modes) else None
    try:
        ctx = EvalContext(engine=engine, codec=codec, cfg=cfg, retriever=retriever, make_env=make_env,
                          greedy=greedy, seed=cfg.seed, batch_size=batch_size)
        report: dict[str, Any] = {"results": {}, "seconds": {}}
        trajectories: dict[str, dict[str, list[Trajectory]]] = {}
        for mode in modes:
            fn = get_mode(mode)
            for name, samples in datasets.items():
                start = time.perf_counter()
                trajs = fn(ctx, samples)
                report["results"].setdefault(mode, {})[name] = trajectory_stats(trajs)
                report["seconds"].setdefault(mode, {})[name] = round(time.perf_counter() - start, 3)
                if keep_trajectories:
                    trajectories.setdefault(mode, {})[name] = trajs
    finally:
        close_all(make_env)
    if keep_trajectories:
        report["trajectories"] = trajectories
    return report


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def evaluate_model(model: str | Path, cfg: Any, datasets: dict[str, list[dict[str, Any]]], modes: list[str],
                   index_dir: str | Path | None = None, greedy: bool = True, batch_size: int = 64,
                   device: str = "auto", keep_trajectories: bool = False, retriever: Any = None) -> dict[str, Any]:
    """Loads a model folder / checkpoint / hub id and evaluates it. A mode that searches uses
    `retriever` (a run's own, left open: `Run.evaluate`), else one opened from `index_dir` (default
    `cfg.search.index_dir`) the way a run opens its index, and closed at the end."""
    from agent_r1.models.build import load_model
    from agent_r1.models.checks import check_chat_template
    from agent_r1.retrieval.base import open_index
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.engines import build_engine, options_from_config

    for mode in modes:
        get_mode(mode)  # fail on a typo before loading anything
    model_obj, tokenizer = load_model(model, cfg.model.dtype)
    # every mode prompts through the template; only tool-using modes need it to list tools
    uses_tools = any(EVAL_MODES.traits(m).tools for m in modes)
    check_chat_template(tokenizer, str(model), cfg.env.format if uses_tools else "")
    device = pick_device(device)
    model_obj.to(device)
    owned = retriever is None and any(needs_retriever(m, cfg) for m in modes)
    if owned:
        # the run's own settings (timeouts, pool, credentials scope) over what the folder records
        retriever = open_index(index_dir or cfg.search.index_dir, cfg.search)
    start = time.perf_counter()
    engine = None
    try:
        # rollout.engine: the same engine choice as training (vLLM serves the model in cfg's precision)
        engine = build_engine(cfg.rollout.engine, model_obj, tokenizer, options_from_config(cfg, device))
        report = evaluate_datasets(engine, ChatCodec(tokenizer), cfg, datasets, modes, retriever=retriever,
                                   greedy=greedy, batch_size=batch_size, keep_trajectories=keep_trajectories)
    finally:
        close_all(retriever if owned else None, engine)
    report.update({"model": str(model), "index": str(index_dir or cfg.search.index_dir) if retriever else None,
                   "greedy": greedy, "wall_seconds": round(time.perf_counter() - start, 3)})
    if keep_trajectories:
        report["tokenizer"] = tokenizer
    return report


# ------------------------------------------------------------------------------ output

def format_table(report: dict[str, Any]) -> str:
    """A markdown table: one row per (mode, dataset); columns TABLE_COLUMNS. '-' where a metric is undefined."""
    header = ["mode", "dataset"] + [h for _, h, _ in TABLE_COLUMNS]
    rows = []
    for mode, per_ds in report["results"].items():
        for ds, stats in per_ds.items():
            rows.append([mode, ds] + [fmt.format(stats[k]) if k in stats else "-" for k, _, fmt in TABLE_COLUMNS])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def em_per_question(report: dict[str, Any], mode: str) -> dict[str, list[float]]:
    """{dataset: EM 0/1 per question, in question order} from a report made with
    `keep_trajectories=True`: the per-question scores bootstrap intervals are drawn from."""
    from agent_r1.rewards.qa import exact_match

    return {ds: [exact_match(t.answer or "", t.sample.get("answers") or []) for t in trajs]
            for ds, trajs in report["trajectories"][mode].items()}


def json_report(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("trajectories", "tokenizer")}


def log_to_mlflow(report: dict[str, Any], prefix: str = "eval") -> bool:
    """Logs every metric as `prefix/mode/dataset/metric` and the JSON report as an artifact, when
    an MLflow run is active (mlflow is imported only then). Returns whether it logged."""
    try:
        import mlflow
    except ImportError:
        return False
    if mlflow.active_run() is None:
        return False
    metrics = {f"{prefix}/{mode}/{ds}/{k}": float(v)
               for mode, per_ds in report["results"].items() for ds, stats in per_ds.items() for k, v in stats.items()}
    mlflow.log_metrics({k.replace("%", "pct"): v for k, v in metrics.items()})
    mlflow.log_dict(json_report(report), f"{prefix}/report.json")
    return True


def write_trajectories(report: dict[str, Any], path: str | Path) -> int:
    """One JSON line per trajectory (mode, dataset, the record of Trajectory.to_dict)."""
    tokenizer = report.get("tokenizer")
    n = 0
    with Path(path).open("w", encoding="utf-8") as f:
        for mode, per_ds in report.get("trajectories", {}).items():
            for ds, trajs in per_ds.items():
                for t in trajs:
                    rec = t.to_dict(tokenizer)
                    rec.pop("token_ids", None)
                    rec.pop("action_mask", None)
                    f.write(json.dumps({"mode": mode, "dataset": ds, "gold": t.sample.get("answers"), **rec},
                                       default=str) + "\n")
                    n += 1
    return n
