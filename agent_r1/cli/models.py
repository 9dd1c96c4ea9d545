"""`agent-r1 build-model` (a hub-style folder without a hub) and `agent-r1 export` (a checkpoint
as a plain model folder, LoRA adapters merged on request)."""

from __future__ import annotations

import argparse
from dataclasses import fields

from agent_r1.models.qwen_like import FAMILIES, LikeShape
from agent_r1.schema import limited

_SHAPE_HELP = {
    "hidden_size": "hidden width", "num_layers": "decoder layers", "num_heads": "attention heads",
    "num_kv_heads": "key/value heads (grouped-query attention)", "intermediate_size": "MLP width",
    "max_position_embeddings": "longest sequence", "seed": "weight initialisation seed",
}


# the config key whose range (schema.LIMITS) a shape argument has, where it is not model.<its name>
_SHAPE_LIMIT = {"num_kv_heads": ("model", "num_heads"), "seed": ("", "seed")}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build-model", help="write a small random model folder with a real family's vocabulary, "
                                           "special tokens and chat template (e.g. --like qwen2.5)")
    p.add_argument("--like", required=True, choices=sorted(FAMILIES))
    p.add_argument("--out", required=True, help="folder to write (config, weights, tokenizer, chat template)")
    defaults = LikeShape()
    for f in fields(LikeShape):
        if f.name in _SHAPE_HELP:
            p.add_argument("--" + f.name.replace("_", "-"), type=limited(*_SHAPE_LIMIT.get(f.name, ("model", f.name))),
                           default=getattr(defaults, f.name),
                           help=f"{_SHAPE_HELP[f.name]} (default {getattr(defaults, f.name)})")
    p.add_argument("--untied", action="store_true", help="separate input and output embeddings (as Qwen2.5-7B+)")
    p.set_defaults(func=cmd_build_model)

    p = sub.add_parser("export", help="write a checkpoint as a model folder that transformers and vLLM load")
    p.add_argument("--checkpoint", required=True, help="an iter_NNNNNN folder, or a checkpoint folder with `latest`")
    p.add_argument("--out", required=True)
    p.add_argument("--merge", action="store_true", help="fold LoRA adapters into the base weights")
    p.add_argument("--base", default=None, help="the adapters' base model (default: the one the adapter records)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.set_defaults(func=cmd_export)


def cmd_build_model(args: argparse.Namespace) -> int:
    from agent_r1.models.qwen_like import build_like

    shape = LikeShape(**{k: getattr(args, k) for k in _SHAPE_HELP}, tie_word_embeddings=not args.untied)
    out = build_like(args.like, args.out, shape)
    print(f"wrote {out} (like {args.like}); load it with --set model.name_or_path={out} or train.init_from={out}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from agent_r1.models.export import export_model

    out = export_model(args.checkpoint, args.out, merge=args.merge, base=args.base, dtype=args.dtype)
    print(f"wrote {out}")
    return 0
