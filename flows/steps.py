"""The train-agent flow's helpers that need no Prefect: the config, the run a task works on (`run_of`),
DVC steps, task cache keys, and the environment a flow program sets before Prefect loads."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA_KEYS = ("seed", "data")
INDEX_KEYS = ("data", "search")


#: Config keys a flow run's parameters may not set, and why: whoever can create a flow run (any
#: holder of the Prefect API's credential) may tune a run, but not make the serving machine run code
#: or commands of their choosing, nor send its credentials or work elsewhere. They stay in the params
#: file on the serving machine (docs/security.md).
SERVING_MACHINE_ONLY: dict[str, str] = {
    "env.mcp_servers": "starts its commands (command, args, env) and connects to its URLs as MCP servers",
    "env.agent": "names Python code the trainer imports and runs",
    "env.tool_args": "is handed to tool code as keyword arguments the flow cannot check",
    "search.url": "receives the serving machine's Elasticsearch credentials",
    "search.credentials_url": "receives the serving machine's Elasticsearch credentials",
    "ray.address": "sends the run's code and data to that Ray cluster",
}
#: Set by flows/serve.py and infra/prefect/worker.sh: the params file the deployment serves
SERVED_PARAMS_ENV = "AGENT_R1_SERVED_PARAMS"


def program_environment() -> None:
    """Prefect's state lives in the project, never phones home, and gets time to start on 2 cores;
    settings the caller gave win. Called where a flow runs as a program, before Prefect is imported
    (it reads its settings once, on import); importing a flow module changes no environment."""
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def overrides_tag(overrides: dict[str, Any] | None) -> str:
    """The flow run's overrides as the MLflow tag shows them: each value's secrets hidden, placed by its
    dotted key (an `env.mcp_servers` value is a list of servers, whose `env` values are hidden)."""
    from agent_r1.redaction import redact_secrets

    def where(key: str) -> tuple[Any, ...]:
        return tuple(int(p) if p.isdigit() else p for p in str(key).split("."))

    return json.dumps({k: redact_secrets(v, where(k)) for k, v in (overrides or {}).items()}, default=str)


def _dotted_paths(key: str, value: Any) -> list[str]:
    """Every dotted key an override sets: `{"env": {"agent": ...}}` sets `env` and `env.agent`."""
    paths = [key]
    if isinstance(value, dict):
        for sub, inner in value.items():
            paths += _dotted_paths(f"{key}.{sub}", inner)
    return paths


def check_flow_parameters(params: str | None, overrides: dict[str, Any] | None) -> None:
    """Refuses a flow run whose overrides set a SERVING_MACHINE_ONLY key (directly, through a
    section's mapping, or below it), and, in a served deployment, a params file other than the one
    served. Raises ValueError naming the key and where to put it instead."""
    for key, value in (overrides or {}).items():
        for path in _dotted_paths(str(key), value):
            for refused, why in SERVING_MACHINE_ONLY.items():
                if path == refused or path.startswith((refused + ".", refused + "[")):
                    raise ValueError(f"flow parameter overrides sets {refused!r}, which {why}: a flow run may not "
                                     f"set it; put it in params.yaml on the serving machine instead")
    served = os.environ.get(SERVED_PARAMS_ENV)
    if served and params is not None and (ROOT / params).resolve() != (ROOT / served).resolve():
        raise ValueError(f"flow parameter params={params!r}: this deployment serves {served!r} only (a params "
                         "file names the code and commands a run may start); change settings with overrides, or "
                         "serve another params file on the serving machine (python -m flows.serve --params)")


def _config(params: str | None, overrides: dict[str, Any] | None):
    from agent_r1.config import load_config

    return load_config(params or None, dict(overrides or {}))


def run_of(run: Any) -> Any:
    """The Run a task works on: the one the flow hands it, or, handed a run folder (a task run on its
    own), the run that folder holds (its config.json, written by `Run.open`)."""
    from agent_r1.runs.run import Run

    return run if isinstance(run, Run) else Run.load(run)


def _sections(cfg: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    tree = cfg.to_dict()
    return {k: tree[k] for k in keys}


def use_dvc(params: str | None, overrides: dict[str, Any] | None, mode: str) -> bool:
    """DVC runs the data steps when asked (`dvc="on"`), or in `auto` mode when the flow runs the
    project's own params.yaml in a DVC repo and no override touches seed/data/search (DVC stages
    read params.yaml only, so with such overrides their outputs would not match this run)."""
    if mode == "off":
        return False
    in_repo = (ROOT / ".dvc").is_dir() and (ROOT / "dvc.yaml").exists()
    same_file = params is not None and Path(params).resolve() == (ROOT / "params.yaml").resolve()
    touches = [k for k in (overrides or {}) if k.split(".")[0] in ("seed", "data", "search")]
    if mode == "on":
        if not in_repo or not same_file or touches:
            raise ValueError(f"dvc='on' needs the project's params.yaml in a DVC repo and no seed/data/search "
                             f"override (got params={params!r}, overrides {touches})")
        return True
    return in_repo and same_file and not touches and shutil_which_dvc() is not None


def shutil_which_dvc() -> str | None:
    import shutil

    venv_dvc = Path(sys.executable).parent / "dvc"
    return str(venv_dvc) if venv_dvc.exists() else shutil.which("dvc")


def dvc_repro(stage: str) -> str:
    cmd = [shutil_which_dvc() or "dvc", "repro", "--single-item", stage]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout


def _digest(*items: Any) -> str:
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _abs(path: str) -> str:
    return str(Path(path).resolve())


def data_key(context: Any, inputs: dict[str, Any]) -> str:
    """Same seed + data config + folder -> same data: a re-run reuses the result. (The flow refreshes
    the cache if the folder was deleted since.)"""
    cfg = run_of(inputs["run"]).cfg
    return "prepare-data-" + _digest(_sections(cfg, DATA_KEYS), _abs(cfg.data.dir), inputs.get("dvc"))


def index_key(context: Any, inputs: dict[str, Any]) -> str | None:
    """Same corpus bytes + search config + folder -> same index."""
    cfg = run_of(inputs["run"]).cfg
    corpus = Path(inputs["data_dir"]) / "corpus.jsonl"
    if not corpus.exists():
        return None  # no caching
    from agent_r1.runs.assembly import corpus_digest  # an unchanged corpus is not read again

    sha = corpus_digest(cfg, corpus)
    return "build-index-" + _digest(_sections(cfg, INDEX_KEYS), _abs(cfg.search.index_dir), sha, inputs.get("dvc"))


def embed_key(context: Any, inputs: dict[str, Any]) -> str | None:
    """Same corpus bytes + backend + encoder settings -> the same embeddings (the cache itself is
    content-addressed too: this only spares loading the model)."""
    cfg = run_of(inputs["run"]).cfg
    corpus = Path(inputs["data_dir"]) / "corpus.jsonl"
    if not corpus.exists():
        return None
    from agent_r1.runs.assembly import corpus_digest  # an unchanged corpus is not read again

    sha = corpus_digest(cfg, corpus)
    search = cfg.to_dict()["search"]
    return "embed-" + _digest({k: search[k] for k in ("backend", "encoder", "embed_cache_dir")}, sha)
